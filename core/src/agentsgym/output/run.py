"""The output of one run: locked, never overwritten silently, written as trials finish.

Modes: ``new`` (none of the run's files may exist), ``overwrite`` (they are removed
first), ``resume`` (same arguments as the run record; the caller plays only the trials
not in :attr:`RunOutput.done`). After an interruption the journal stays for --resume.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentsgym.errors import OutputError, ResumeMismatchError
from agentsgym.output.files import check_output_path, refuse_existing_output
from agentsgym.output.finish import FinishResult, finish_locked, read_output, seed_journal
from agentsgym.output.journal import DEFAULT_FSYNC_INTERVAL, JournalScan, JournalWriter, repair_tail
from agentsgym.output.lock import OutputLock
from agentsgym.output.manifest import RunManifest, read_manifest, write_manifest
from agentsgym.output.paths import OutputPaths
from agentsgym.output.records import TrialKey

if TYPE_CHECKING:
    from typing_extensions import Self

logger = logging.getLogger(__name__)

Mode = Literal["new", "resume", "overwrite"]


def choose_mode(*, resume: bool, overwrite: bool, retry_failed: bool = False) -> Mode:
    """The mode of ``--resume`` / ``--overwrite`` (both at once is an error;
    ``--retry-failed`` goes with ``--resume`` only)."""
    if resume and overwrite:
        raise OutputError(
            "--resume and --overwrite contradict each other: --resume continues the run in "
            "--out, --overwrite deletes it; give one"
        )
    if retry_failed and not resume:
        raise OutputError("--retry-failed replays the failed trials of a run: give --resume too")
    return "resume" if resume else "overwrite" if overwrite else "new"


class RunOutput:
    """The files of the run writing ``out``."""

    def __init__(
        self,
        out: str | Path,
        manifest: RunManifest,
        *,
        mode: Mode = "new",
        fsync_interval: float = DEFAULT_FSYNC_INTERVAL,
        retry_failed: bool = False,
    ) -> None:
        self.paths = OutputPaths(Path(out))
        self.manifest = manifest
        self.mode = mode
        self.retry_failed = retry_failed
        self.fsync_interval = fsync_interval
        self.lock = OutputLock(self.paths.lock, output=self.paths.out)
        self.previous = JournalScan(self.paths.journal)
        self.writer: JournalWriter | None = None
        self.resumed_from: RunManifest | None = None
        self._written = 0
        self._closed = False
        # Trials arrive on the event loop's thread while an interrupt closes the output
        # on the main thread: the writer is swapped out and closed under this lock.
        self._writer_lock = threading.Lock()

    def open(self) -> Self:
        """Check the path, take the lock, apply the mode, start the journal."""
        self.paths = OutputPaths(check_output_path(self.paths.out))
        self.lock.acquire()
        try:
            self._prepare()
            write_manifest(self.manifest, self.paths.manifest)
            self.writer = JournalWriter(
                self.paths.journal,
                fsync_interval=self.fsync_interval,
                compress=not self.paths.is_jsonl,
            )
        except BaseException:
            self.lock.release()
            raise
        return self

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        self.close(interrupted=exc_type is not None)

    def _prepare(self) -> None:
        with_summary = self.manifest.command == "eval"
        if self.mode == "new":  # checked again under the lock: another run may have begun
            refuse_existing_output(self.paths.out, with_summary=with_summary)
        existing = self.paths.existing(with_summary=with_summary)
        if self.mode == "overwrite":
            for path in existing:
                path.unlink()
        elif self.mode == "resume":
            self._resume(existing)

    def _resume(self, existing: list[Path]) -> None:
        if not self.paths.manifest.exists():
            if existing:
                raise OutputError(
                    f"{str(self.paths.out)!r} exists but has no run record "
                    f"({self.paths.manifest.name}), so --resume cannot tell which run wrote it; "
                    "give --overwrite to replace it, or choose another --out"
                )
            logger.info("nothing to resume at %s; starting the run", self.paths.out)
            return
        before = read_manifest(self.paths.manifest)
        problems = []
        if before.command != self.manifest.command:
            problems.append(f"  - command: {before.command!r} then, {self.manifest.command!r} now")
        problems += before.arguments.differences(self.manifest.arguments)
        if problems:
            raise ResumeMismatchError(
                f"--resume refused: {str(self.paths.out)!r} was written by a run with other "
                "arguments:\n" + "\n".join(problems) + "\nRun the same command as before "
                "(see the command_line in " + self.paths.manifest.name + "), or give "
                "--overwrite to start over, or choose another --out"
            )
        self.resumed_from = before
        self.previous = read_output(self.paths)
        if self.paths.journal.exists():
            if cut := repair_tail(self.previous):
                logger.warning(
                    "%s ended in a torn trial (%d bytes, from an interrupted write); it was "
                    "cut off and that trial will be played again",
                    self.paths.journal,
                    cut,
                )
        elif len(self.done) < self.manifest.planned_trials:
            seed_journal(self.paths, self.previous)
        self.manifest.started_at = before.started_at
        self.manifest.resumed = before.resumed + 1
        self.manifest.done_trials = len(self.done)

    @property
    def done(self) -> set[TrialKey]:
        """The trials already in the output (resume); play only the others. With
        ``retry_failed`` a failed trial is not done: its new rows replace it."""
        trials = self.previous.trials
        return {k for k, rows in trials.items() if not self.retry_failed or not _failed(rows)}

    def write_trial(self, make_rows: Callable[[], list[dict[str, Any]]]) -> None:
        """Append one finished trial; ``make_rows`` runs on the writer thread."""
        with self._writer_lock:
            if self.writer is None:
                if self._closed:  # a trial that ended after an interrupt; --resume plays it
                    logger.debug("a trial finished as %s was closed; not written", self.paths.out)
                    return
                raise OutputError("the output is not open; call open() first")
            self.writer.submit(make_rows)

    def finish(self) -> FinishResult:
        """Drain the journal, write the final file, mark the run record; keep the lock
        until :meth:`close`."""
        self._close_writer()
        return finish_locked(self.paths, self.manifest)

    def close(self, *, interrupted: bool = False) -> None:
        """Drain the journal and release the lock. After an interruption the run record
        says so and the journal stays for ``--resume``. A trial that finishes from now on
        (its episode ended as the interrupt came) is not written: --resume plays it."""
        with self._writer_lock:
            self._closed = True
        try:
            self._close_writer()
        finally:
            try:  # also when the interrupt came while finish() wrote the final file
                if interrupted and self.manifest.status == "running":
                    self._mark_interrupted()
            finally:
                self.lock.release()

    def _close_writer(self) -> None:
        with self._writer_lock:
            writer, self.writer = self.writer, None
        if writer is not None:
            try:
                writer.close()
            finally:
                self._written = writer.trials_written

    def _mark_interrupted(self) -> None:
        try:
            scan = read_output(self.paths)
            self.manifest.done_trials = len(scan.trials)
            self.manifest.status = "interrupted"
            write_manifest(self.manifest, self.paths.manifest)
        except (OSError, OutputError) as exc:  # the journal itself is what matters
            logger.warning("could not update %s: %s", self.paths.manifest, exc)

    @property
    def trials_written(self) -> int:
        """Trials this run appended so far (not counting those resumed from)."""
        return self.writer.trials_written if self.writer is not None else self._written


def _failed(rows: list[dict[str, Any]]) -> bool:
    return any(row.get("error") is not None for row in rows)
