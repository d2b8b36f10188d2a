"""One resource per event loop (an HTTP connection pool), each closed on its own loop.

An aiohttp session belongs to the loop that made it: it cannot be used from another
loop, and it closes cleanly only on its own. A client used from several loops (the
runner's background loop, a caller's ``asyncio.run``) keeps one per loop here, and
each is closed on its loop: by :meth:`PerLoop.aclose` there, by :meth:`PerLoop.close`
from plain code, when its owner is dropped or the process exits (the owner registers
``close`` with :func:`weakref.finalize`), and when ``asyncio.run`` ends its loop (a
loop closes its async generators as it ends, and each resource has one parked on its
loop for that).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["PerLoop"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

CLOSE_TIMEOUT_SECONDS = 5.0
"""How long closing waits for a resource's own loop (running in another thread)."""


@dataclass
class _Entry(Generic[T]):
    resource: T
    guard: Any


class PerLoop(Generic[T]):
    """One ``make()`` per event loop (see the module docstring).

    :param make: a new resource, called on the loop that will use it.
    :param aclose: closes a resource, awaited on its own loop.
    :param abandon: closes a resource without its loop (that loop is closed, or is
        this thread's and cannot be waited for): whatever can be closed directly.
    :param is_closed: whether a resource was closed under its owner (a new one is
        made then).
    """

    def __init__(
        self,
        make: Callable[[], T],
        aclose: Callable[[T], Awaitable[object]],
        *,
        abandon: Callable[[T], None] | None = None,
        is_closed: Callable[[T], bool] | None = None,
    ) -> None:
        self._make = make
        self._aclose = aclose
        self._abandon = abandon
        self._is_closed = is_closed
        self._entries: weakref.WeakKeyDictionary[Any, _Entry[T]] = weakref.WeakKeyDictionary()

    def get(self) -> T:
        """The running loop's resource, made on first use."""
        loop = asyncio.get_running_loop()
        entry = self._entries.get(loop)
        if entry is not None and not (self._is_closed and self._is_closed(entry.resource)):
            return entry.resource
        if entry is not None:  # closed under us: finish its guard, make a new one
            _finish_guard(entry.guard)
        resource = self._make()
        guard = self._guard(loop, resource)
        self._entries[loop] = _Entry(resource, guard)
        _park(guard)  # at its yield: the loop now tracks it, and closes it as it ends
        return resource

    def __len__(self) -> int:
        """How many loops hold a resource."""
        return len(self._entries)

    def values(self) -> Iterator[T]:
        """The resources of every loop."""
        return iter([entry.resource for entry in list(self._entries.values())])

    async def aclose(self) -> None:
        """Close the running loop's resource."""
        entry = self._entries.pop(asyncio.get_running_loop(), None)
        if entry is not None:
            await entry.guard.aclose()  # the guard closes the resource

    def close(self) -> None:
        """Close every loop's resource from plain code, whatever state its loop is in."""
        for loop in list(self._entries):
            entry = self._entries.pop(loop, None)
            if entry is not None:
                self._close_on_loop(loop, entry)

    async def _guard(self, loop: Any, resource: T) -> AsyncIterator[None]:
        """Parked on ``resource``'s loop for its life; closing it (the loop ending under
        ``asyncio.run``, :meth:`aclose`, :meth:`close`) closes the resource on that loop,
        the only place it can close cleanly."""
        try:
            yield
        finally:
            entry = self._entries.get(loop)
            if entry is not None and entry.resource is resource:
                del self._entries[loop]
            if not (self._is_closed and self._is_closed(resource)):
                await self._aclose(resource)

    def _close_on_loop(self, loop: Any, entry: _Entry[T]) -> None:
        """Close one resource on its own loop when that loop can still run: running in
        another thread (wait for it there) or stopped (run it to completion); else
        (closed, or this very thread's loop, which cannot be waited for) abandon it."""
        try:
            here = asyncio._get_running_loop()
            if loop.is_running() and here is not loop:
                closing = asyncio.run_coroutine_threadsafe(_aclose(entry.guard), loop)
                closing.result(CLOSE_TIMEOUT_SECONDS)
                return
            if not loop.is_running() and not loop.is_closed() and here is None:
                loop.run_until_complete(_aclose(entry.guard))
                return
        except Exception:  # closing must never mask what the caller is doing
            logger.debug("closing a connection pool on its loop failed", exc_info=True)
        if self._abandon is not None:
            try:
                self._abandon(entry.resource)
            except Exception:  # a closed loop cannot close its transports: nothing more
                logger.debug("closing a connection pool failed", exc_info=True)
        _finish_guard(entry.guard)


def _park(guard: Any) -> None:
    """Run a fresh guard to its ``yield`` without awaiting: it awaits nothing before."""
    step = guard.asend(None)
    try:
        step.send(None)
    except StopIteration:
        return
    raise RuntimeError("a loop guard awaited before it parked")  # pragma: no cover


async def _aclose(guard: Any) -> None:
    await guard.aclose()


def _finish_guard(guard: Any) -> None:
    """Close a guard whose resource is already closed or abandoned, without a loop (it
    awaits nothing then); a guard left unfinished would be closed by its loop's
    finalizer hook, which fails on a closed loop."""
    closing = guard.aclose()
    try:
        closing.send(None)
    except StopIteration:
        return
    except Exception:  # a guard that cannot finish is left to the collector
        logger.debug("finishing a connection pool guard failed", exc_info=True)
        return
    closing.close()
