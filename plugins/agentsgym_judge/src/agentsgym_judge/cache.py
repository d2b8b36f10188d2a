"""Judgements kept by their request: the same prompt is never sent twice.

A finished judgement is kept (least recently used dropped first, beyond ``size``); a
judgement in flight is shared: a second episode asking the same question while the
first one waits gets the first one's answer, from any thread or event loop (it awaits
a :class:`concurrent.futures.Future`). A failure is shared with the callers waiting
for it but never kept: the next caller asks again. A caller cancelled while it asks
(its episode timed out) leaves the question to one of those waiting.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class _AskerLeft(Exception):
    """The caller asking for everyone was cancelled: a waiting caller asks instead."""


class SharedAnswers(Generic[T]):
    """Answers by key: kept when finished (up to ``size``), shared while in flight.

    ``size=0`` keeps and shares nothing: every call asks.
    """

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"the cache size must be >= 0, got {size}")
        self.size = size
        self._lock = threading.Lock()
        self._kept: collections.OrderedDict[str, T] = collections.OrderedDict()
        self._asking: dict[str, concurrent.futures.Future[T]] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)

    async def get(self, key: str, ask: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """``(answer, reused)``: the kept or shared answer of ``key`` (``reused``), else
        ``await ask()``."""
        if not self.size:
            return await ask(), False
        while True:
            with self._lock:
                if key in self._kept:
                    self._kept.move_to_end(key)
                    return self._kept[key], True
                pending = self._asking.get(key)
                if pending is None:
                    pending = self._asking[key] = concurrent.futures.Future()
                    # Running: a waiter's cancellation cannot cancel it for everyone.
                    pending.set_running_or_notify_cancel()
                    break
            try:
                return await asyncio.wrap_future(pending), True
            except _AskerLeft:
                continue
        return await self._ask(key, pending, ask), False

    async def _ask(
        self, key: str, pending: concurrent.futures.Future[T], ask: Callable[[], Awaitable[T]]
    ) -> T:
        try:
            answer = await ask()
        except Exception as exc:
            self._stop_sharing(key, pending)
            pending.set_exception(exc)
            raise
        except BaseException:
            self._stop_sharing(key, pending)
            pending.set_exception(_AskerLeft())
            raise
        with self._lock:
            self._kept[key] = answer
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
        self._stop_sharing(key, pending)
        pending.set_result(answer)
        return answer

    def _stop_sharing(self, key: str, pending: concurrent.futures.Future[T]) -> None:
        with self._lock:
            if self._asking.get(key) is pending:
                del self._asking[key]
