"""The output lock: one process at a time writes a given ``--out``.

The lock is an ``flock`` on ``OUT.lock``: the kernel drops it when its process
dies, however it dies (``kill -9`` included), so a lock left by a dead process never
blocks the next run. The file holds who took it (pid, host, command, start time) so
that a second process is refused with a message naming the first. The holder removes
the file when it releases the lock; a process that took the lock on a file that was
removed meanwhile notices (the path no longer leads to its file) and tries again.

``flock`` works on local filesystems and on NFSv4 (where Linux maps it to a POSIX
lock). Where ``fcntl`` does not exist (Windows) the output is not locked, and a
warning says so.
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import logging
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from agentsgym.errors import OutputError, OutputLockedError
from agentsgym.output.redaction import redact_argv
from agentsgym.surrogates import repair_text

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

_ATTEMPTS = 5


class LockHolder(BaseModel):
    """Who holds an output lock: what the lock file says."""

    pid: int
    host: str
    command: str
    started_at: str

    @classmethod
    def of_this_process(cls) -> LockHolder:
        return cls(
            pid=os.getpid(),
            host=socket.gethostname(),
            command=repair_text(" ".join(redact_argv(_command_line())))[0],
            started_at=_dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        )

    def describe(self) -> str:
        alive = ""
        if self.host == socket.gethostname() and not _pid_alive(self.pid):
            alive = (
                " (that process has exited; a process it started may still hold the lock: stop it)"
            )
        return (
            f"process {self.pid} on {self.host}, started {self.started_at}, running "
            f"`{self.command}`{alive}"
        )


class OutputLock:
    """An exclusive, non-blocking lock on one output path (see the module docstring)."""

    def __init__(self, path: Path, *, output: Path | None = None) -> None:
        self.path = path
        self.output = output or path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or raise :class:`OutputLockedError` naming its holder."""
        if self._fd is not None:
            return
        if fcntl is None:  # pragma: no cover - Windows
            logger.warning("file locks are not available here: %s is not locked", self.output)
            return
        for _ in range(_ATTEMPTS):
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                    raise OutputError(f"cannot lock {str(self.path)!r}: {exc.strerror}") from None
                raise OutputLockedError(self._locked_message()) from None
            if self._still_linked(fd):
                self._fd = fd
                self._write_holder(fd)
                return
            os.close(fd)  # the holder removed it while we opened it: try the new file
        raise OutputLockedError(self._locked_message())

    def release(self) -> None:
        """Remove the lock file and drop the lock (the file goes first, see above)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(fd)

    def __enter__(self) -> OutputLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.release()

    # ------------------------------------------------------------------ helpers
    def _open(self) -> int:
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OutputError(
                f"cannot create the lock file {str(self.path)!r}: {exc.strerror}; choose "
                "another --out"
            ) from None

    def _still_linked(self, fd: int) -> bool:
        try:
            mine, there = os.fstat(fd), os.stat(self.path)
        except FileNotFoundError:
            return False
        return (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)

    @staticmethod
    def _write_holder(fd: int) -> None:
        data = LockHolder.of_this_process().model_dump_json().encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)

    def read_holder(self) -> LockHolder | None:
        """Who holds the lock, as its file says (None if unreadable or empty)."""
        for delay in (0.0, 0.05, 0.2):  # the holder writes its name just after locking
            time.sleep(delay)
            try:
                return LockHolder.model_validate(json.loads(self.path.read_bytes()))
            except (OSError, ValueError, ValidationError):
                continue
        return None

    def _locked_message(self) -> str:
        holder = self.read_holder()
        who = holder.describe() if holder is not None else "another process"
        return (
            f"{str(self.output)!r} is being written by {who}. Wait for it to finish or stop "
            "it, then run again (with --resume to continue its run); or choose another --out"
        )


def _command_line() -> list[str]:
    argv = list(sys.argv)
    if argv and argv[0].endswith(("__main__.py", "agentsgym")):
        argv[0] = "agentsgym"
    return argv


def _pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (one we may not signal counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, it is someone else's
        return True
    return True
