"""The bridge between plain calls and agentsgym's asyncio engine.

Episodes run as tasks on an event loop. Plain (synchronous) callers reach that loop
through :func:`run_sync`, which works the same from a script, from a worker thread
and from a notebook whose own loop is already running:

* the coroutine runs on one process-wide **background loop** (a daemon thread
  started on first use), never on the caller's loop, so a notebook's running loop
  is no obstacle and clients bound to a loop (httpx connection pools) are reused
  across calls;
* the calling thread blocks until the result is ready; Ctrl-C (KeyboardInterrupt in
  the calling thread) cancels the coroutine on the loop, waits briefly for its
  cleanup, and re-raises.

Calling :func:`run_sync` from a coroutine running on the background loop itself
would deadlock; it raises instead and says to ``await``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")
P = ParamSpec("P")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
CANCEL_GRACE_SECONDS = 10.0


def background_loop() -> asyncio.AbstractEventLoop:
    """The process-wide event loop that :func:`run_sync` runs coroutines on."""
    global _loop, _thread
    with _lock:
        if _loop is not None and _thread is not None and _thread.is_alive():
            return _loop
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


def running_background_loop() -> asyncio.AbstractEventLoop | None:
    """The background loop if it was started (without starting it)."""
    if _loop is not None and _thread is not None and _thread.is_alive():
        return _loop
    return None


def on_background_loop() -> bool:
    """Whether the current thread is the background loop's thread."""
    return _thread is not None and threading.current_thread() is _thread


def run_sync(awaitable: Awaitable[T]) -> T:
    """Run ``awaitable`` to completion on the background loop and return its result."""
    if on_background_loop():
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
        try:
            future.result(timeout=CANCEL_GRACE_SECONDS)
        except (concurrent.futures.CancelledError, concurrent.futures.TimeoutError, Exception):
            pass
        raise


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


def sync_twin(coroutine_function: Callable[P, Awaitable[T]]) -> Callable[P, T]:
    """The plain-call twin of a coroutine function: the same signature and docs, run
    through :func:`run_sync`. Every async entry point of agentsgym is written once,
    as a coroutine, and its plain twin is this wrapper (``run_trial = sync_twin(
    arun_trial)``), so the two can never drift apart."""

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
    """Run a coroutine that never suspends to completion, without an event loop.

    The episode engine writes each env turn once, as a coroutine; for envs whose
    hooks are plain functions nothing in it awaits a real suspension, so a worker
    thread drives it with a single ``send``. A coroutine that does suspend is a bug
    in the engine, reported as such.
    """
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise RuntimeError("an env turn of a synchronous env suspended; this is an agentsgym bug")
