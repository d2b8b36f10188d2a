"""The agentsgym side of the bridge: the bridge program as a child process.

:class:`VerifiersBridge` starts ``bridge_program.py`` with the Python of the venv
verifiers lives in, waits for its ready line, and then sends requests as JSON lines
and matches the replies by id. A reader thread owns the child's stdout, so requests
may come from any thread and any event loop (the engine runs episodes on several):
:meth:`VerifiersBridge.run` awaits a future of the loop it is called on, and a run
that is cancelled (an episode's timeout) tells the program to abandon it.

A child that dies fails every request in flight with its exit status and the tail of
its stderr.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import itertools
import json
import logging
import os
import subprocess
import threading
from pathlib import Path
from typing import IO, Any

from agentsgym.errors import AgentsGymError

logger = logging.getLogger("agentsgym_verifiers.bridge")

PROGRAM = Path(__file__).resolve().with_name("bridge_program.py")
STDERR_TAIL_LINES = 40


class VerifiersBridgeError(AgentsGymError):
    """The bridge program could not start, died, or answered a request with an error."""


class VerifiersBridge:
    """See the module docstring.

    :param python: the Python of the venv verifiers is installed in.
    :param settings: the program's settings (``env``: verifiers' env config data;
        ``address``: an env server already running; ``max_concurrent``, ``startup_timeout``).
    :param python_path: folders put on the program's ``PYTHONPATH`` (a taskset module
        that is not installed).
    """

    def __init__(
        self, python: str, settings: dict[str, Any], *, python_path: list[str] | None = None
    ) -> None:
        self.python = python
        self.settings = settings
        self.python_path = list(python_path or [])
        self.ready: dict[str, Any] = {}
        self._process: subprocess.Popen[str] | None = None
        self._pending: dict[int, concurrent.futures.Future[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ lifetime
    def start(self, timeout: float) -> dict[str, Any]:
        """Start the program and return its ready line (the env server's address, the
        verifiers version); :class:`VerifiersBridgeError` if it does not get ready."""
        environment = dict(os.environ)
        # The venv's own tools (uv, which verifiers' harnesses run) come first on PATH.
        bin_dir = str(Path(self.python).parent)
        environment["PATH"] = os.pathsep.join([bin_dir, environment.get("PATH", "")])
        if self.python_path:
            inherited = [environment["PYTHONPATH"]] if environment.get("PYTHONPATH") else []
            environment["PYTHONPATH"] = os.pathsep.join([*self.python_path, *inherited])
        try:
            process = subprocess.Popen(
                [self.python, str(PROGRAM), json.dumps(self.settings)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                env=environment,
                start_new_session=True,
            )
        except OSError as exc:
            raise VerifiersBridgeError(
                f"could not start verifiers' Python {self.python!r}: {exc}. Set `python` in "
                "the env_config (or AGENTSGYM_VERIFIERS_PYTHON) to the python of a venv with "
                "verifiers==0.4.0 installed"
            ) from None
        self._process = process
        assert process.stdout is not None and process.stderr is not None
        self._follow(self._drain_stderr, process.stderr)
        ready = concurrent.futures.Future[dict[str, Any]]()
        with self._lock:
            self._pending[0] = ready
        self._follow(self._read_replies, process.stdout)
        try:
            reply = ready.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            self.close()
            raise VerifiersBridgeError(
                f"verifiers' env server did not get ready within {timeout:g} s "
                f"(startup_timeout_seconds){self._stderr_tail()}"
            ) from None
        except VerifiersBridgeError:
            self.close()
            raise
        if not reply.get("ready"):
            self.close()
            raise VerifiersBridgeError(
                f"verifiers' env server could not start: {reply.get('error')}{self._stderr_tail()}"
            )
        self.ready = reply
        return reply

    def close(self) -> None:
        """End the program (closing its stdin; killed if it does not exit)."""
        process, self._process = self._process, None
        if process is None:
            return
        try:
            if process.stdin is not None:
                process.stdin.close()
            process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()
        for thread in self._threads:
            thread.join(timeout=5)
        self._fail_pending("the bridge was closed")

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    # ------------------------------------------------------------------ requests
    def request(self, message: dict[str, Any]) -> tuple[int, concurrent.futures.Future[Any]]:
        """Send ``message`` (an ``op`` and its fields); its id and the future of its reply."""
        future = concurrent.futures.Future[dict[str, Any]]()
        with self._lock:
            ident = next(self._ids)
            self._pending[ident] = future
            self._send({"id": ident, **message})
        return ident, future

    def tasks(self, count: int | None, timeout: float) -> list[dict[str, Any]]:
        """The task data of the first ``count`` tasks of the taskset (all, if None)."""
        _, future = self.request({"op": "tasks", "count": count})
        try:
            reply = future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            raise VerifiersBridgeError(
                f"loading the taskset's tasks took over {timeout:g} s"
            ) from None
        return list(self._answer(reply, "loading the tasks")["tasks"])

    async def run(
        self, task_data: dict[str, Any], base_url: str, model: str, sampling: dict[str, Any]
    ) -> dict[str, Any]:
        """One rollout of ``task_data`` on the env server, the model at ``base_url``: the
        episode's summary (its rewards, metrics, errors)."""
        ident, future = self.request(
            {
                "op": "run",
                "task_data": task_data,
                "base_url": base_url,
                "model": model,
                "sampling": sampling,
            }
        )
        try:
            reply = await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            with self._lock:
                self._pending.pop(ident, None)
                if self.alive:
                    self._send({"op": "cancel", "target": ident})
            raise
        return dict(self._answer(reply, "the rollout")["episode"])

    # ------------------------------------------------------------------ internals
    def _send(self, message: dict[str, Any]) -> None:
        process = self._process
        if process is None or process.stdin is None or process.poll() is not None:
            raise VerifiersBridgeError(
                f"the bridge to verifiers is not running{self._stderr_tail()}"
            )
        try:
            process.stdin.write(json.dumps(message) + "\n")
            process.stdin.flush()
        except OSError as exc:
            raise VerifiersBridgeError(
                f"the bridge to verifiers stopped reading: {exc}{self._stderr_tail()}"
            ) from None

    def _answer(self, reply: dict[str, Any], what: str) -> dict[str, Any]:
        if "error" in reply:
            raise VerifiersBridgeError(f"{what} failed in verifiers: {reply['error']}")
        return reply

    def _follow(self, target: Any, stream: IO[str]) -> None:
        thread = threading.Thread(target=target, args=(stream,), daemon=True)
        thread.start()
        self._threads.append(thread)

    def _read_replies(self, stream: IO[str]) -> None:
        for line in stream:
            try:
                reply = json.loads(line)
            except json.JSONDecodeError:
                logger.warning("the bridge program wrote a line that is not JSON: %.200s", line)
                continue
            ident = 0 if "ready" in reply else reply.get("id")
            with self._lock:
                future = self._pending.pop(ident, None)
            if future is not None and not future.done():
                future.set_result(reply)
        code = self._process.wait() if self._process is not None else None
        self._fail_pending(f"the bridge program exited (status {code})")

    def _drain_stderr(self, stream: IO[str]) -> None:
        for line in stream:
            self._stderr.append(line.rstrip("\n"))
            logger.debug("verifiers: %s", line.rstrip("\n"))

    def _fail_pending(self, why: str) -> None:
        with self._lock:
            pending, self._pending = list(self._pending.values()), {}
        for future in pending:
            if not future.done():
                future.set_exception(VerifiersBridgeError(f"{why}{self._stderr_tail()}"))

    def _stderr_tail(self) -> str:
        if not self._stderr:
            return ""
        return "; its stderr ends with:\n" + "\n".join(self._stderr)
