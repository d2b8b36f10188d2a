"""The output lock: one process at a time writes a given ``--out``.

An ``flock`` on ``OUT.lock``: the kernel drops it however its process dies (even by
``kill -9``), so a dead run never blocks the next. The file names the holder for the
refusal message. The holder removes the file on release, so a process that locked a
file removed meanwhile tries again. ``flock`` works locally and on NFSv4; without
``fcntl`` (Windows) nothing is locked, with a warning.
"""

from __future__ import annotations

import datetime as _dt
import errno
import logging
import os
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from agentsgym.errors import OutputError, OutputLockedError
from agentsgym.redaction import redact_argv
from agentsgym.surrogates import repair_text

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from typing_extensions import Self

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
        argv = list(sys.argv)
        if argv and argv[0].endswith(("__main__.py", "agentsgym")):
            argv[0] = "agentsgym"
        return cls(
            pid=os.getpid(),
            host=socket.gethostname(),
            command=repair_text(" ".join(redact_argv(argv)))[0],
            started_at=_dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        )

    def describe(self) -> str:
        text = f"process {self.pid} on {self.host}, started {self.started_at}, running "
        text += f"`{self.command}`"
        if self.host == socket.gethostname() and not _pid_alive(self.pid):
            text += (
                " (that process has exited; a process it started may still hold the lock: stop it)"
            )
        return text


class OutputLock:
    """An exclusive, non-blocking lock on one output path.

    :param path: the lock file.
    :param output: what it locks, as the refusal names it (default: ``path``).
    :param option: the command's option that chooses ``output``, for the refusal's advice.
    """

    def __init__(self, path: Path, *, output: Path | None = None, option: str = "--out") -> None:
        self.path = path
        self.output = output or path
        self.option = option
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
                os.ftruncate(fd, 0)
                os.pwrite(fd, LockHolder.of_this_process().model_dump_json().encode(), 0)
                return
            os.close(fd)  # the holder removed it while we opened it: try the new file
        raise OutputLockedError(self._locked_message())

    def release(self) -> None:
        """Remove the lock file, then drop the lock (see the module docstring)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(fd)

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def _open(self) -> int:
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OutputError(
                f"cannot create the lock file {str(self.path)!r}: {exc.strerror}; choose "
                f"another {self.option}"
            ) from None

    def _still_linked(self, fd: int) -> bool:
        try:
            mine, there = os.fstat(fd), os.stat(self.path)
        except FileNotFoundError:
            return False
        return os.path.samestat(mine, there)

    def read_holder(self) -> LockHolder | None:
        """Who holds the lock, as its file says (None if unreadable or empty)."""
        for delay in (0.0, 0.05, 0.2):  # the holder writes its name just after locking
            time.sleep(delay)
            try:
                return LockHolder.model_validate_json(self.path.read_bytes())
            except (OSError, ValueError):  # ValidationError is a ValueError
                continue
        return None

    def _locked_message(self) -> str:
        holder = self.read_holder()
        who = holder.describe() if holder is not None else "another process"
        return (
            f"{str(self.output)!r} is being written by {who}. Wait for it to finish or stop "
            f"it, then run again (with --resume to continue its run); or choose another "
            f"{self.option}"
        )


def _pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (one we may not signal counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, it is someone else's
        return True
    return True
