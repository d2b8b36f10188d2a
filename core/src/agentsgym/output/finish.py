"""Finishing an output: from the journal to the file ``datasets`` loads.

A ``.jsonl`` output is its own journal: finishing cuts a torn end off (and drops a
trial found twice, which only a hand-edited file can hold). A ``.parquet`` output is
written whole from the sorted journal rows and renamed over ``OUT``; the journal is
removed only once every planned trial is there, so ``--resume`` can go on from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentsgym.atomic_files import write_atomically
from agentsgym.errors import OutputError
from agentsgym.output.journal import JournalScan, encode_rows, repair_tail, scan_journal
from agentsgym.output.lock import OutputLock
from agentsgym.output.manifest import RunManifest, read_manifest, write_manifest
from agentsgym.output.paths import OutputPaths
from agentsgym.output.records import trial_key


@dataclass
class FinishResult:
    """What a finished (or partly finished) output holds."""

    path: Path
    manifest: RunManifest
    rows: list[dict[str, Any]] = field(default_factory=list)
    trials: int = 0

    @property
    def planned(self) -> int:
        return self.manifest.planned_trials

    @property
    def complete(self) -> bool:
        return self.trials >= self.planned

    def trial_errors(self) -> list[str | None]:
        """The error of every trial (None when it succeeded), for a FailureReport."""
        errors: dict[tuple[int, int], str | None] = {}
        for row in self.rows:
            key = trial_key(row)
            if key not in errors or row.get("error") is not None:
                errors[key] = row.get("error")
        return list(errors.values())


def sort_key(row: dict[str, Any]) -> tuple[int, int, int, int]:
    task, rollout = row["task_index"], row["rollout_index"]
    return task, rollout, row.get("episode_index") or 0, row.get("segment_index") or 0


def read_output(paths: OutputPaths) -> JournalScan:
    """The trials already written for ``paths.out``: its journal, else a finished parquet."""
    if paths.journal.exists() or paths.is_jsonl:
        return scan_journal(paths.journal)
    scan = JournalScan(paths.journal)
    if paths.out.exists():
        for row in _read_parquet(paths.out):
            scan.trials.setdefault(trial_key(row), []).append(row)
    return scan


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    import datasets

    try:
        return datasets.Dataset.from_parquet(str(path)).to_list()
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many kinds for a damaged file
        raise OutputError(
            f"cannot read {str(path)!r} back ({type(exc).__name__}: {exc}); it is not a finished "
            "output of this run: start over with --overwrite, or choose another --out"
        ) from None


def seed_journal(paths: OutputPaths, scan: JournalScan) -> None:
    """Write a finished parquet's rows into a new journal, so a run can append to it."""
    if paths.is_jsonl or paths.journal.exists() or not scan.trials:
        return
    write_atomically(paths.journal, encode_rows(scan.rows))


def finish_locked(paths: OutputPaths, manifest: RunManifest) -> FinishResult:
    """Finish ``paths.out`` (see the module docstring); the caller holds the lock."""
    scan = read_output(paths)
    if paths.journal.exists():
        repair_tail(scan)
    rows = sorted(scan.rows, key=sort_key)
    result = FinishResult(paths.out, manifest, rows=rows, trials=len(scan.trials))
    if paths.is_jsonl:
        if scan.duplicates:
            write_atomically(paths.out, encode_rows(scan.rows))
    elif paths.journal.exists():
        if rows:
            _write_parquet(rows, paths.out)
        if result.complete:
            paths.journal.unlink()
    manifest.done_trials = result.trials
    manifest.failed_trials = sum(1 for error in result.trial_errors() if error is not None)
    manifest.status = "complete" if result.complete else "partial"
    write_manifest(manifest, paths.manifest)
    return result


def _write_parquet(rows: list[dict[str, Any]], out: Path) -> None:
    from agentsgym.trajectory import records_to_dataset

    write_atomically(out, lambda tmp: records_to_dataset(rows).to_parquet(str(tmp)))


def finish_output(out: str | Path) -> FinishResult:
    """Write ``OUT`` of an interrupted run from the trials played so far
    (``agentsgym finish-output OUT``); a run still writing it is refused by its lock."""
    paths = OutputPaths(Path(out))
    if not paths.manifest.exists():
        if paths.out.exists() or paths.journal.exists():
            raise OutputError(
                f"{str(paths.out)!r} has no run record ({paths.manifest.name}), so it was not "
                "written by an agentsgym rollout/eval run that can be finished"
            )
        raise OutputError(
            f"there is no run writing {str(paths.out)!r}: neither it, its journal "
            f"({paths.journal.name}) nor its run record ({paths.manifest.name}) exist"
        )
    with OutputLock(paths.lock, output=paths.out):
        manifest = read_manifest(paths.manifest)
        return finish_locked(paths, manifest)
