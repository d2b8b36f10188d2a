"""The bridge between plain calls and agentsgym's asyncio engine.

:func:`run_sync` runs coroutines on one process-wide background loop (a daemon thread),
never the caller's: it works the same from a script, a worker thread or a notebook
whose loop is running, and loop-bound clients (HTTP pools) are reused across calls.
A coroutine that lets ``SystemExit`` or ``KeyboardInterrupt`` out stops the loop (asyncio
does so): every call waiting on it then raises :class:`LoopThreadDiedError` instead of
waiting forever, and the next call starts a new loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from agentsgym.errors import AgentsGymError

__all__ = [
    "LoopThreadDiedError",
    "background_loop",
    "drive",
    "run_sync",
    "running_background_loop",
    "sync_twin",
]

T = TypeVar("T")
P = ParamSpec("P")

logger = logging.getLogger(__name__)

CANCEL_GRACE_SECONDS = 10.0
_MAX_ESCAPES = 10_000


class LoopThreadDiedError(AgentsGymError, RuntimeError):
    """agentsgym's background loop thread ended while a caller waited on it: a coroutine
    raised ``SystemExit`` or ``KeyboardInterrupt``, which asyncio lets out of the loop.
    The exception that ended the thread is the ``__cause__``; the next call starts a
    new loop."""


class _LoopThread:
    """One background event loop, the daemon thread that runs it, and how it ended."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        # Done when the thread stops serving; its result is the exception that ended it.
        self.ended: concurrent.futures.Future[BaseException | None] = concurrent.futures.Future()
        ready = threading.Event()
        self.thread = threading.Thread(
            target=self._serve, args=(ready,), name="agentsgym-loop", daemon=True
        )
        self.thread.start()
        ready.wait()

    def alive(self) -> bool:
        return self.thread.is_alive() and not self.ended.done()

    def _serve(self, ready: threading.Event) -> None:
        _this_thread.serves_loop = True
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(ready.set)
        cause: BaseException | None = None
        try:
            self.loop.run_forever()
        except BaseException as exc:  # noqa: BLE001 - handed to every waiting caller
            cause = exc
        finally:
            ready.set()
            self.ended.set_result(cause)
            self._shut_down()

    def _shut_down(self) -> None:
        """Cancel the coroutines left on the dead loop, give them a grace period for
        their cleanup, and close the loop, so that nothing is scheduled on it again."""
        cleanup = self.loop.create_task(_cancel_all())
        # The exception that killed the loop escapes it again from each task that awaited
        # the one that raised it, as it wakes (and each escape ends a task): go on after
        # each, up to a bound in case a coroutine keeps starting such tasks.
        escapes = 0
        while not cleanup.done() and escapes < _MAX_ESCAPES:
            try:
                self.loop.run_until_complete(cleanup)
            except BaseException:  # noqa: BLE001 - the loop is dead already
                escapes += 1
        if escapes:
            logger.debug("%d exceptions left agentsgym's dead event loop in its cleanup", escapes)
        self.loop.close()

    def result(self, future: concurrent.futures.Future[T], timeout: float | None = None) -> T:
        """``future``'s result, or :class:`LoopThreadDiedError` as soon as the loop
        thread ends without having completed it."""
        concurrent.futures.wait(
            [future, self.ended], timeout=timeout, return_when=concurrent.futures.FIRST_COMPLETED
        )
        if self.ended.done() and not _completed_on_the_loop(future):
            cause = self.ended.result()
            message = "agentsgym's event loop thread stopped while this call waited for it"
            if cause is not None:
                message = (
                    f"agentsgym's event loop thread died of {type(cause).__name__}({cause}) "
                    "while this call waited for it: a coroutine on it (an async agent, hook "
                    "or tool) raised it, and asyncio stops its loop for SystemExit and "
                    "KeyboardInterrupt"
                )
            raise LoopThreadDiedError(message) from cause
        return future.result(timeout=0)


async def _cancel_all() -> None:
    """Cancel what is left on the dead loop and wait for its cleanup a while. The first
    pass runs the callbacks the loop left: finished tasks hand their outcomes on, and
    calls submitted as it died start, to be cancelled in the second pass."""
    for _ in range(2):
        await asyncio.sleep(0)
        tasks = asyncio.all_tasks() - {asyncio.current_task()}
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=CANCEL_GRACE_SECONDS)


def _completed_on_the_loop(future: concurrent.futures.Future[Any]) -> bool:
    """Whether the coroutine returned or raised an ordinary exception (a SystemExit or
    KeyboardInterrupt it raised ended the loop instead; a cancellation is its cleanup)."""
    if not future.done() or future.cancelled():
        return False
    error = future.exception(timeout=0)
    return error is None or isinstance(error, Exception)


_lock = threading.Lock()
_current: _LoopThread | None = None
_this_thread = threading.local()


def running_background_loop() -> asyncio.AbstractEventLoop | None:
    """The background loop if it was started and is running (without starting it)."""
    current = _current
    if current is not None and current.alive():
        return current.loop
    return None


def _loop_thread() -> _LoopThread:
    global _current
    with _lock:
        if _current is None or not _current.alive():
            _current = _LoopThread()
        return _current


def background_loop() -> asyncio.AbstractEventLoop:
    """The process-wide event loop that :func:`run_sync` runs coroutines on (a new one
    when the last one's thread died)."""
    return _loop_thread().loop


def run_sync(awaitable: Awaitable[T]) -> T:
    """Run ``awaitable`` to completion on the background loop and return its result.

    :raises LoopThreadDiedError: the loop's thread died first (a coroutine on it raised
        ``SystemExit`` or ``KeyboardInterrupt``).
    """
    if getattr(_this_thread, "serves_loop", False):
        if asyncio.iscoroutine(awaitable):
            awaitable.close()
        raise RuntimeError(
            "run_sync() was called from agentsgym's own event loop, which would wait for "
            "itself forever; `await` the coroutine instead (e.g. `await env.arun_trial(...)`)"
        )
    loop_thread = _loop_thread()
    future = asyncio.run_coroutine_threadsafe(_as_coroutine(awaitable), loop_thread.loop)
    try:
        return loop_thread.result(future)
    except KeyboardInterrupt:
        future.cancel()
        with contextlib.suppress(Exception):  # the coroutine's cleanup, given a grace period
            loop_thread.result(future, timeout=CANCEL_GRACE_SECONDS)
        raise


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


def sync_twin(coroutine_function: Callable[P, Awaitable[T]]) -> Callable[P, T]:
    """The plain-call twin of a coroutine function, run through :func:`run_sync`:
    every async entry point is written once, so the two cannot drift apart."""

    @functools.wraps(coroutine_function)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(coroutine_function(*args, **kwargs))

    name = coroutine_function.__name__
    call.__name__ = name.removeprefix("a")
    call.__qualname__ = coroutine_function.__qualname__.replace(name, call.__name__)
    call.__doc__ = (
        f"A plain call of :func:`{name}` (scripts, worker threads, notebooks with a "
        f"running event loop); ``await {name}(...)`` is the coroutine.\n\n"
        + (coroutine_function.__doc__ or "")
    )
    return call


def drive(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (an env turn of plain hooks) without a loop:
    one ``send``. A turn that suspends is an engine bug."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise RuntimeError("an env turn of a synchronous env suspended; this is an agentsgym bug")
