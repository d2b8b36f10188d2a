"""Where a run's files live, all beside its ``--out``.

For ``--out runs/x.parquet``:

* ``runs/x.parquet``: the output; a parquet file is written once, when the run ends
  (or by ``agentsgym finish-output``);
* ``runs/x.parquet.journal.jsonl``: the journal, one JSON line per row, appended as
  trials finish; a ``.jsonl`` output *is* its own journal, so it is loadable at
  every moment;
* ``runs/x.parquet.run.json``: the run record (the arguments that made it, counts,
  status), kept after the run; ``--resume`` compares against it;
* ``runs/x.parquet.lock``: exists while a process writes the output;
* ``runs/x.summary.json``: the summary of an ``eval`` run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

JOURNAL_SUFFIX = ".journal.jsonl"
MANIFEST_SUFFIX = ".run.json"
LOCK_SUFFIX = ".lock"
SUMMARY_SUFFIX = ".summary.json"


@dataclass(frozen=True)
class OutputPaths:
    """The files of the run writing ``out``."""

    out: Path

    @property
    def is_jsonl(self) -> bool:
        return self.out.suffix == ".jsonl"

    @property
    def journal(self) -> Path:
        """Where rows are appended while the run goes: the output itself for .jsonl."""
        return self.out if self.is_jsonl else self.out.with_name(self.out.name + JOURNAL_SUFFIX)

    @property
    def manifest(self) -> Path:
        return self.out.with_name(self.out.name + MANIFEST_SUFFIX)

    @property
    def lock(self) -> Path:
        return self.out.with_name(self.out.name + LOCK_SUFFIX)

    @property
    def summary(self) -> Path:
        return self.out.with_name(self.out.stem + SUMMARY_SUFFIX)

    def existing(self, *, with_summary: bool = False) -> list[Path]:
        """The run's files that exist now (the lock aside)."""
        candidates = [self.out, self.journal, self.manifest]
        if with_summary:
            candidates.append(self.summary)
        seen: list[Path] = []
        for path in candidates:
            if path not in seen and path.exists():
                seen.append(path)
        return seen
