"""The bridge between plain calls and agentsgym's asyncio engine.

:func:`run_sync` runs coroutines on one process-wide background loop (a daemon thread),
never the caller's: it works the same from a script, a worker thread or a notebook
whose loop is running, and loop-bound clients (HTTP pools) are reused across calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

__all__ = ["background_loop", "drive", "run_sync", "running_background_loop", "sync_twin"]

T = TypeVar("T")
P = ParamSpec("P")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
CANCEL_GRACE_SECONDS = 10.0


def running_background_loop() -> asyncio.AbstractEventLoop | None:
    """The background loop if it was started (without starting it)."""
    if _loop is not None and _thread is not None and _thread.is_alive():
        return _loop
    return None


def background_loop() -> asyncio.AbstractEventLoop:
    """The process-wide event loop that :func:`run_sync` runs coroutines on."""
    global _loop, _thread
    with _lock:
        if (running := running_background_loop()) is not None:
            return running
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        thread = threading.Thread(target=serve, name="agentsgym-loop", daemon=True)
        thread.start()
        ready.wait()
        _loop, _thread = loop, thread
        return loop


def run_sync(awaitable: Awaitable[T]) -> T:
    """Run ``awaitable`` to completion on the background loop and return its result."""
    if threading.current_thread() is _thread:
        if asyncio.iscoroutine(awaitable):
            awaitable.close()
        raise RuntimeError(
            "run_sync() was called from agentsgym's own event loop, which would wait for "
            "itself forever; `await` the coroutine instead (e.g. `await env.arun_trial(...)`)"
        )
    loop = background_loop()
    future = asyncio.run_coroutine_threadsafe(_as_coroutine(awaitable), loop)
    try:
        return future.result()
    except KeyboardInterrupt:
        future.cancel()
        with contextlib.suppress(Exception):  # the coroutine's cleanup, given a grace period
            future.result(timeout=CANCEL_GRACE_SECONDS)
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
