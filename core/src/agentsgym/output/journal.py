"""The journal: rows appended as trials finish, one JSON object per line.

The journal of a parquet output writes each trial as one line ``{"zlib": BASE64}`` of
its rows compressed (token fields are long lists of small numbers: a ninth of the size).

A trial's rows go out in one write, from a writer thread so the event loop never waits
on the disk; ``kill -9`` loses nothing written, a power cut at most the seconds since
the last fsync. So an interrupted write can only damage the *end*: a last line without
its newline, or a last trial short of the rows it says it has. That torn trial counts
as not played (:func:`repair_tail` cuts it off); damage elsewhere is a JournalError.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
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
    return tolist() if callable(tolist) else str(value)


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
        lines.append(line + b"\n")
    return b"".join(lines)


def compress_rows(rows: Iterable[dict[str, Any]]) -> bytes:
    """One journal line holding ``rows`` compressed (see the module docstring)."""
    return b'{"zlib": "' + base64.b64encode(zlib.compress(encode_rows(rows))) + b'"}\n'


def decode_line(line: bytes) -> list[dict[str, Any]]:
    """The rows of one journal line, compressed or not."""
    row = json.loads(line)
    if isinstance(row, dict) and row.keys() == {"zlib"}:
        data = zlib.decompress(base64.b64decode(row["zlib"], validate=True))
        return [json.loads(text) for text in data.splitlines()]
    return [row]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:  # os.write may write less than it was given
        view = view[os.write(fd, view) :]


class JournalWriter:
    """Appends trials to a journal from one background thread."""

    def __init__(
        self, path: Path, *, fsync_interval: float = DEFAULT_FSYNC_INTERVAL, compress: bool = False
    ) -> None:
        self.path = path
        self.encode = compress_rows if compress else encode_rows
        self.fsync_interval = fsync_interval
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OutputError(f"cannot open {str(path)!r} for writing: {exc.strerror}") from None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentsgym-journal")
        self._error: BaseException | None = None
        self._last_sync = time.monotonic()
        self._lock = threading.Lock()
        self.trials_written = 0
        self._closed = False

    def submit(self, make_rows: Callable[[], list[dict[str, Any]]]) -> None:
        """Queue one trial: ``make_rows`` runs on the writer thread, its rows are appended.
        Cheap enough for the event loop; raises :class:`OutputError` if a write failed."""
        self.raise_error()
        if self._closed:
            raise OutputError(f"the journal {str(self.path)!r} is closed")
        self._executor.submit(self._write, make_rows)

    def _write(self, make_rows: Callable[[], list[dict[str, Any]]]) -> None:
        if self._error is not None:
            return
        try:
            rows = make_rows()
            _write_all(self._fd, self.encode(rows))
            self.trials_written += 1
            now = time.monotonic()
            if now - self._last_sync >= self.fsync_interval:
                os.fsync(self._fd)
                self._last_sync = now
        except BaseException as exc:  # noqa: BLE001 - kept and raised on the run's thread
            self._error = exc
            logger.error("writing %s failed: %s: %s", self.path, type(exc).__name__, exc)

    def raise_error(self) -> None:
        if (exc := self._error) is not None:
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
    offset = number = 0

    def close_group(final: bool) -> None:
        nonlocal group, group_key
        if group_key is None:
            return
        if len(group) == expected(group[0]):
            if scan.trials.pop(group_key, None) is not None:
                scan.duplicates += 1  # the later copy counts: a failed trial played again
            scan.trials[group_key] = group
            scan.valid_size = offset
        elif not final:  # a torn trial can only be the last one
            raise JournalError(
                f"{path}: the trial (task {group_key[0]}, rollout {group_key[1]}) ending at "
                f"line {number - 1} has {len(group)} of its {expected(group[0])} rows, and more "
                "trials follow it; the file was changed by something other than one agentsgym "
                "run. Remove the damaged lines, or start over with --overwrite"
            )
        group, group_key = [], None

    try:
        with open(path, "rb") as handle:
            for line in handle:
                number += 1
                if not line.endswith(b"\n"):
                    break  # a torn last line
                try:
                    rows = decode_line(line)
                    keys = [trial_key(row) for row in rows]
                except (ValueError, KeyError, TypeError, zlib.error):
                    if not handle.read(1):  # the last line: written in full but unparseable
                        break
                    raise JournalError(
                        f"{path}:{number} is not a row agentsgym wrote, and rows follow it; "
                        "remove that line, or start over with --overwrite"
                    ) from None
                for row, key in zip(rows, keys):
                    # a whole trial ends its group, also when the next copy of it follows
                    if key != group_key or (group and len(group) == expected(group[0])):
                        close_group(final=False)
                        group_key = key
                    group.append(row)
                offset += len(line)
            close_group(final=True)
            scan.size = os.fstat(handle.fileno()).st_size
    except OSError as exc:
        raise OutputError(f"cannot read {str(path)!r}: {exc.strerror}") from None
    return scan


def repair_tail(scan: JournalScan) -> int:
    """Cut a torn end off the journal (see :func:`scan_journal`); returns bytes cut."""
    cut = scan.torn_bytes
    if cut > 0:
        logger.info("cutting a torn trial (%d bytes) off the end of %s", cut, scan.path)
        with open(scan.path, "r+b") as handle:
            handle.truncate(scan.valid_size)
            os.fsync(handle.fileno())
        scan.size = scan.valid_size
    return cut
