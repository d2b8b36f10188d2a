"""The runner's worker threads: plain agents and plain env hooks run here.

About half the cost of ``run_in_executor`` + ``wait_for`` (bench/bench_engine.py), which
at one hop per turn is most of the engine's cost: jobs go through a ``SimpleQueue``,
results back by one ``call_soon_threadsafe``; a budget is one loop timer. A job over
budget fails at once while its thread runs on (it cannot be interrupted), raising the
thread limit by one until it returns, so abandoned jobs never starve the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_STOP = object()


def _deliver(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # expired or cancelled meanwhile: the caller has moved on
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _expire(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_exception(asyncio.TimeoutError())


class _Job:
    __slots__ = ("args", "fn", "future", "loop", "state")

    def __init__(
        self, fn: Callable[..., Any], args: tuple[Any, ...], loop: Any, future: Any
    ) -> None:
        self.fn = fn
        self.args = args
        self.loop = loop
        self.future = future
        self.state = "queued"  # -> running -> done, or abandoned by its caller


class WorkerPool:
    """Runs plain functions for coroutines, off the event loop."""

    def __init__(self, size: int, name: str = "agentsgym-worker") -> None:
        if size < 1:
            raise ValueError(f"a worker pool needs at least one thread, got {size}")
        self.size = size
        self.name = name
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._waiting = 0  # jobs in the queue, not yet taken by a thread
        self._abandoned = 0
        self._closed = False

    async def run(self, fn: Callable[..., T], *args: Any, timeout: float | None = None) -> T:
        """``fn(*args)`` in a worker thread; :class:`asyncio.TimeoutError` past ``timeout``."""
        if self._closed:
            raise RuntimeError("the worker pool is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        job = _Job(fn, args, loop, future)
        with self._lock:
            self._waiting += 1
        self._jobs.put(job)
        self._grow()
        timer = loop.call_later(timeout, _expire, future) if timeout is not None else None
        try:
            return await future
        except BaseException:
            with self._lock:
                if job.state in ("queued", "running"):
                    job.state = "abandoned"
                    self._abandoned += 1
            self._grow()
            raise
        finally:
            if timer is not None:
                timer.cancel()

    def _grow(self) -> None:
        with self._lock:
            if self._waiting <= self._idle or self._threads >= self.size + self._abandoned:
                return
            self._threads += 1
            number = self._threads
        threading.Thread(target=self._work, name=f"{self.name}-{number}", daemon=True).start()

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            job = self._jobs.get()
            with self._lock:
                self._idle -= 1
                if job is _STOP:
                    self._threads -= 1
                    return
                self._waiting -= 1
                if job.state == "abandoned":  # its caller gave up before it started
                    self._abandoned -= 1
                    continue
                job.state = "running"
            result = None
            error = None
            try:
                result = job.fn(*job.args)
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                error = exc
            with self._lock:
                if job.state == "abandoned":
                    self._abandoned -= 1
                job.state = "done"
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
                job.loop.call_soon_threadsafe(_deliver, job.future, result, error)

    def close(self) -> None:
        """Let idle threads exit; threads running an abandoned job exit when it returns."""
        self._closed = True
        with self._lock:
            threads = self._threads
        for _ in range(threads):
            self._jobs.put(_STOP)
