"""A server process a training run starts, watches and always stops.

:class:`ServerProcess` runs a command under :mod:`agentsgym_trl.server_supervisor`
(with the python given, which may be another venv's), in a process group of its own
and a new session, its output in a log file:

* Ctrl-C in the terminal reaches the trainer only, which stops the server in order;
* :meth:`ServerProcess.stop` sends ``SIGTERM`` to the whole group (the server and every
  process it started), then ``SIGKILL`` to what is left;
* if the trainer dies, even by ``SIGKILL``, the supervisor sees its parent gone and
  stops the group itself.

:meth:`ServerProcess.wait_ready` polls a health URL until it answers 200, reporting
the time waited and the log's last line, and fails with the end of the log when the
server exits or the time is up.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from agentsgym.errors import AgentsGymError
from agentsgym_trl import server_supervisor

STOP_GRACE_SECONDS = 20.0
"""How long the server has to shut down on SIGTERM before it is killed."""
LOG_TAIL_LINES = 25


class ServerStartError(AgentsGymError):
    """A server the run started exited, or was not ready in time."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS has free now (another process may take it before the server does;
    the server's start then fails with the reason in its log)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def answers(url: str, timeout: float = 5.0) -> bool:
    """Whether ``url`` answers HTTP 200 now."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, OSError, TimeoutError):
        return False


class ServerProcess:
    """A supervised server process (see the module docstring).

    :param python: the python that runs the supervisor (the server's own is best: it
        needs nothing but the standard library).
    :param command: the server's command line.
    :param health_url: answers 200 once the server is ready.
    :param log_path: where the server's output goes (appended).
    :param env: environment variables added to this process's for the server.
    :param name: how messages call it ("the vLLM server").
    """

    def __init__(
        self,
        python: str | Path,
        command: Sequence[str],
        *,
        health_url: str,
        log_path: Path,
        env: Mapping[str, str] | None = None,
        name: str = "the server",
        grace: float = STOP_GRACE_SECONDS,
    ) -> None:
        self.python = str(python)
        self.command = list(command)
        self.health_url = health_url
        self.log_path = Path(log_path)
        self.env = dict(env or {})
        self.name = name
        self.grace = grace
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def supervised_command(self) -> list[str]:
        supervisor = str(Path(server_supervisor.__file__))
        return [self.python, supervisor, str(self.grace), "--", *self.command]

    def start(self) -> ServerProcess:
        if self.process is not None:
            raise ServerStartError(f"{self.name} was started already")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            self.supervised_command(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **self.env},
            start_new_session=True,
        )
        return self

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_ready(
        self,
        timeout: float,
        on_progress: Callable[[float, str], None] | None = None,
        *,
        poll_seconds: float = 1.0,
    ) -> float:
        """Wait until :attr:`health_url` answers; the seconds it took.
        ``on_progress(seconds waited, last log line)`` is called after every look. When
        the server exits, or ``timeout`` seconds pass (it is then stopped), raises
        :class:`ServerStartError` with the end of its log."""
        started = time.monotonic()
        while True:
            waited = time.monotonic() - started
            if not self.running():
                code = self.process.returncode if self.process is not None else None
                raise ServerStartError(
                    f"{self.name} exited during start-up (code {code}); the end of its log, "
                    f"{self.log_path}:\n{self.log_tail()}"
                )
            if answers(self.health_url, timeout=max(1.0, min(5.0, poll_seconds * 5))):
                return waited
            if waited > timeout:
                self.stop()
                raise ServerStartError(
                    f"{self.name} was not ready after {timeout:g}s and was stopped. The end "
                    f"of its log, {self.log_path}:\n{self.log_tail()}"
                )
            if on_progress is not None:
                on_progress(waited, self.last_log_line())
            time.sleep(poll_seconds)

    def stop(self) -> int | None:
        """Stop the server and every process it started; the supervisor's exit code
        (``None``: never started)."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=self.grace + 10.0)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        return process.returncode

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ the log
    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty log)"

    def last_log_line(self) -> str:
        for line in reversed(self.log_tail(5).splitlines()):
            if line.strip():
                return line.strip()
        return ""
