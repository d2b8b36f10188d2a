"""ToolThreads: the worker threads of sync tools, apart from the engine's own pool.

Python cannot stop a thread, so a sync tool that overruns its timeout keeps running.
Here such a call is abandoned: its thread is written off and no longer counts against
``max_workers``, so a new thread serves the next call and overruns never starve later
calls (of this episode or any other). The threads written off are bounded too: past
``max_abandoned`` of them still running, none is replaced, and later calls wait for a
free thread within their own timeout. Idle threads end after ``idle_seconds``.

An exception a tool raises, ``SystemExit`` and ``KeyboardInterrupt`` included, comes
back as :class:`ToolEscape` (an ``Exception``), which never stops the event loop.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["ToolEscape", "ToolThreads", "shared_tool_threads"]

logger = logging.getLogger(__name__)


class ToolEscape(Exception):
    """A tool raised a ``BaseException`` that is not an ``Exception`` (``SystemExit``,
    ``KeyboardInterrupt``): carried as an ordinary error, its cause the original."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


class _Job:
    __slots__ = ("function", "future", "loop", "state", "written_off")

    def __init__(self, function: Callable[[], Any], loop: asyncio.AbstractEventLoop) -> None:
        self.function = function
        self.loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()
        self.state = "queued"  # -> running -> done; or queued -> dropped
        self.written_off = False


class ToolThreads:
    """Runs sync tool calls in threads of its own (see the module docstring)."""

    def __init__(
        self, max_workers: int = 32, *, max_abandoned: int = 64, idle_seconds: float = 30.0
    ) -> None:
        if max_workers < 1 or max_abandoned < 0:
            raise ValueError("ToolThreads needs max_workers >= 1 and max_abandoned >= 0")
        self.max_workers = max_workers
        self.max_abandoned = max_abandoned
        self.idle_seconds = idle_seconds
        self._lock = threading.Lock()
        self._wakeup = threading.Condition(self._lock)
        self._jobs: collections.deque[_Job] = collections.deque()
        self._workers = 0  # threads counted against max_workers
        self._idle = 0
        self.abandoned = 0  # threads written off that still run a call

    async def run(self, function: Callable[[], Any], timeout: float) -> Any:
        """``function()`` in a tool thread; ``asyncio.TimeoutError`` past ``timeout``
        seconds (waiting for a free thread included), the call then abandoned."""
        job = _Job(function, asyncio.get_running_loop())
        with self._lock:
            self._jobs.append(job)
            self._wake_or_start()
        try:
            return await asyncio.wait_for(job.future, timeout)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            self._abandon(job)
            raise

    def _wake_or_start(self) -> None:
        """Under the lock: a queued job gets an idle thread, or a new one if allowed."""
        if self._idle > 0:
            self._wakeup.notify()
        elif self._workers < self.max_workers:
            self._workers += 1
            threading.Thread(target=self._work, name="agentsgym-tool", daemon=True).start()

    def _abandon(self, job: _Job) -> None:
        with self._lock:
            if job.state == "queued":
                job.state = "dropped"
            elif job.state == "running" and self.abandoned < self.max_abandoned:
                job.written_off = True
                self.abandoned += 1
                self._workers -= 1  # its thread ends after the call: another takes its place
                if self._jobs:
                    self._wake_or_start()
            elif job.state == "running":
                logger.warning(
                    "%d tool calls still run past their timeout; no more threads are "
                    "replaced, so later calls wait for these to return",
                    self.abandoned,
                )

    def _work(self) -> None:
        while True:
            with self._lock:
                job = self._next_job()
                if job is None:
                    self._workers -= 1
                    return
                job.state = "running"
            outcome = _outcome(job.function)
            with self._lock:
                job.state = "done"
                written_off = job.written_off
                if written_off:
                    self.abandoned -= 1
            _settle_soon(job, outcome)
            if written_off:
                return  # replaced: this thread no longer counts against max_workers

    def _next_job(self) -> _Job | None:
        """Under the lock: the next queued job, or ``None`` after ``idle_seconds`` idle."""
        while True:
            while self._jobs:
                job = self._jobs.popleft()
                if job.state == "queued":
                    return job
            self._idle += 1
            woken = self._wakeup.wait(self.idle_seconds)
            self._idle -= 1
            if not woken and not self._jobs:
                return None


def _outcome(function: Callable[[], Any]) -> tuple[bool, Any]:
    try:
        return True, function()
    except Exception as exc:  # noqa: BLE001 - the runner answers the model with it
        return False, exc
    except BaseException as exc:  # noqa: BLE001 - SystemExit must not end the run
        return False, ToolEscape(exc)


def _settle_soon(job: _Job, outcome: tuple[bool, Any]) -> None:
    def settle() -> None:
        if job.future.done():  # abandoned: nobody waits for the answer
            return
        ok, value = outcome
        if ok:
            job.future.set_result(value)
        else:
            job.future.set_exception(value)

    try:
        job.loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the loop closed while the call ran
        logger.debug("a tool call finished after its event loop closed")


_shared: ToolThreads | None = None
_shared_lock = threading.Lock()


def shared_tool_threads() -> ToolThreads:
    """The process's tool threads, used by every runner not given its own."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = ToolThreads()
        return _shared
