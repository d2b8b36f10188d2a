"""The journal: rows appended as trials finish, one JSON object per line.

**Writing.** A trial's rows are encoded and appended with one write of whole lines,
by one writer thread, so the event loop that plays episodes never waits on the disk.
Each write is handed to the operating system at once (a ``kill -9`` of the process
loses nothing written); ``fsync`` runs at most every ``fsync_interval`` seconds and
at the end (a power cut may lose the last seconds).

**Reading back** (:func:`scan_journal`). A trial's lines are contiguous, so a write
cut short by ``kill -9``, a full disk or a power cut can only damage the *end* of the
journal: a last line without its newline, or a last trial with fewer rows than it
says it has (:func:`~agentsgym.output.records.expected_rows`). That torn tail is
reported (and cut off by :func:`repair_tail`); its trial counts as not played, so a
trial is in the journal completely or not at all. Damage anywhere else is not a
torn write and raises :class:`~agentsgym.errors.JournalError`.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentsgym.errors import JournalError, OutputError
from agentsgym.output.records import TrialKey, expected_rows, trial_key
from agentsgym.surrogates import repair_value

logger = logging.getLogger(__name__)

DEFAULT_FSYNC_INTERVAL = 2.0
"""Seconds between two fsyncs of the journal while a run writes it."""


def _default(value: Any) -> Any:
    # numpy arrays and scalars (token fields) become lists and numbers, not strings.
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    return str(value)


def encode_rows(rows: Iterable[dict[str, Any]]) -> bytes:
    """The rows as JSON lines (UTF-8). Text UTF-8 cannot encode and non-finite numbers
    (not JSON) are repaired (U+FFFD, null) rather than failing the run."""
    lines = []
    for row in rows:
        try:
            line = json.dumps(row, ensure_ascii=False, allow_nan=False, default=_default).encode()
        except (ValueError, UnicodeEncodeError):
            fixed = repair_value(json.loads(json.dumps(row, default=_default)))
            line = json.dumps(fixed, ensure_ascii=False, allow_nan=False).encode()
        lines.append(line)
    return b"".join(line + b"\n" for line in lines)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class JournalWriter:
    """Appends trials to a journal from one background thread (see the module doc)."""

    def __init__(self, path: Path, *, fsync_interval: float = DEFAULT_FSYNC_INTERVAL) -> None:
        self.path = path
        self.fsync_interval = fsync_interval
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OutputError(f"cannot open {str(path)!r} for writing: {exc.strerror}") from None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentsgym-journal")
        self._pending: deque[Future[None]] = deque()
        self._error: BaseException | None = None
        self._last_sync = time.monotonic()
        self._lock = threading.Lock()
        self.trials_written = 0
        self.rows_written = 0
        self._closed = False

    def submit(self, make_rows: Callable[[], list[dict[str, Any]]]) -> None:
        """Queue one trial: ``make_rows`` runs on the writer thread, its rows are appended.

        Cheap, so it can be called from the event loop. Raises :class:`OutputError`
        if an earlier write failed (a full disk), which stops the run.
        """
        self.raise_error()
        if self._closed:
            raise OutputError(f"the journal {str(self.path)!r} is closed")
        while self._pending and self._pending[0].done():
            self._pending.popleft()
        self._pending.append(self._executor.submit(self._write, make_rows))

    def _write(self, make_rows: Callable[[], list[dict[str, Any]]]) -> None:
        if self._error is not None:
            return
        try:
            rows = make_rows()
            _write_all(self._fd, encode_rows(rows))
            self.trials_written += 1
            self.rows_written += len(rows)
            now = time.monotonic()
            if now - self._last_sync >= self.fsync_interval:
                os.fsync(self._fd)
                self._last_sync = now
        except BaseException as exc:  # kept and raised on the run's thread
            self._error = exc
            logger.error("writing %s failed: %s: %s", self.path, type(exc).__name__, exc)

    def raise_error(self) -> None:
        if self._error is not None:
            exc = self._error
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise OutputError(
                f"writing {str(self.path)!r} failed ({type(exc).__name__}: {reason}); the trials "
                "written before are kept: fix the cause and run again with --resume"
            ) from exc

    def close(self) -> None:
        """Wait for every queued trial, fsync, close; raise if a write failed."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._executor.shutdown(wait=True)
        try:
            os.fsync(self._fd)
        except OSError:
            pass
        finally:
            os.close(self._fd)
        self.raise_error()


@dataclass
class JournalScan:
    """What a journal holds: its complete trials, and how much of its end is torn."""

    path: Path
    trials: dict[TrialKey, list[dict[str, Any]]] = field(default_factory=dict)
    valid_size: int = 0
    size: int = 0
    duplicates: int = 0
    torn_rows: int = 0

    @property
    def torn_bytes(self) -> int:
        return self.size - self.valid_size

    @property
    def rows(self) -> list[dict[str, Any]]:
        return [row for rows in self.trials.values() for row in rows]


def scan_journal(
    path: Path, *, expected: Callable[[dict[str, Any]], int] = expected_rows
) -> JournalScan:
    """Read a journal back (see the module docstring); a missing file is empty."""
    scan = JournalScan(path)
    if not path.exists():
        return scan
    group: list[dict[str, Any]] = []
    group_key: TrialKey | None = None
    offset = 0
    number = 0

    def close_group(final: bool) -> None:
        nonlocal group, group_key
        if group_key is None:
            return
        if len(group) == expected(group[0]):
            if group_key in scan.trials:
                scan.duplicates += 1
            else:
                scan.trials[group_key] = group
            scan.valid_size = offset
        elif not final:
            raise JournalError(
                f"{path}: the trial (task {group_key[0]}, rollout {group_key[1]}) ending at "
                f"line {number - 1} has {len(group)} of its {expected(group[0])} rows, and more "
                "trials follow it; the file was changed by something other than one agentsgym "
                "run. Remove the damaged lines, or start over with --overwrite"
            )
        else:
            scan.torn_rows = len(group)
        group, group_key = [], None

    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise OutputError(f"cannot read {str(path)!r}: {exc.strerror}") from None
    with handle:
        for line in handle:
            number += 1
            if not line.endswith(b"\n"):
                break  # a torn last line
            try:
                row = json.loads(line)
                key = trial_key(row)
            except (ValueError, KeyError, TypeError):
                rest = handle.read(1)
                if not rest:  # the very last line: written in full but unparseable
                    break
                raise JournalError(
                    f"{path}:{number} is not a row agentsgym wrote, and rows follow it; "
                    "remove that line, or start over with --overwrite"
                ) from None
            if key != group_key:
                close_group(final=False)
                group_key = key
            group.append(row)
            offset += len(line)
        close_group(final=True)
        scan.size = os.fstat(handle.fileno()).st_size
    return scan


def repair_tail(scan: JournalScan) -> int:
    """Cut a torn end off the journal (see :func:`scan_journal`); returns bytes cut."""
    cut = scan.torn_bytes
    if cut > 0:
        logger.info("cutting a torn trial (%d bytes) off the end of %s", cut, scan.path)
        with open(scan.path, "r+b") as handle:
            handle.truncate(scan.valid_size)
            handle.flush()
            os.fsync(handle.fileno())
        scan.size = scan.valid_size
        scan.torn_rows = 0
    return cut
