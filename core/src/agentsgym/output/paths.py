"""Where a run's files live, all beside its ``--out``: for ``runs/x.parquet``, the
journal ``x.parquet.journal.jsonl`` (a ``.jsonl`` output is its own journal), the run
record ``x.parquet.run.json``, the lock ``x.parquet.lock`` and eval's ``x.summary.json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


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
        return self.out if self.is_jsonl else self.out.with_name(self.out.name + ".journal.jsonl")

    @property
    def manifest(self) -> Path:
        return self.out.with_name(self.out.name + ".run.json")

    @property
    def lock(self) -> Path:
        return self.out.with_name(self.out.name + ".lock")

    @property
    def summary(self) -> Path:
        return self.out.with_name(self.out.stem + ".summary.json")

    def existing(self, *, with_summary: bool = False) -> list[Path]:
        """The run's files that exist now (the lock aside)."""
        candidates = [self.out, self.journal, self.manifest]
        if with_summary:
            candidates.append(self.summary)
        # dict.fromkeys: a .jsonl output is its own journal, list it once
        return [path for path in dict.fromkeys(candidates) if path.exists()]
