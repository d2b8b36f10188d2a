"""At most N judge requests in flight, whichever thread or event loop sends them.

A judge is shared by every episode of a run: plain hooks reach it from worker threads
(through agentsgym's background loop), ``async`` hooks from the runner's loop, and a
test or a notebook from a loop of its own. An :class:`asyncio.Semaphore` belongs to
one loop, so the bound is kept here under a thread lock, and a caller that has to wait
is woken on its own loop (a :class:`concurrent.futures.Future` it awaits there).
Waiters are served first come, first served.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import threading
from types import TracebackType


class InFlightLimit:
    """An async context manager held by at most ``limit`` callers at once."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the in-flight limit must be at least 1, got {limit}")
        self.limit = limit
        self._lock = threading.Lock()
        self._free = limit
        self._waiters: collections.deque[concurrent.futures.Future[None]] = collections.deque()

    @property
    def in_flight(self) -> int:
        """Callers holding the limit now."""
        with self._lock:
            return self.limit - self._free

    @property
    def waiting(self) -> int:
        """Callers waiting for a slot now."""
        with self._lock:
            return len(self._waiters)

    async def __aenter__(self) -> None:
        with self._lock:
            if self._free and not self._waiters:
                self._free -= 1
                return
            turn: concurrent.futures.Future[None] = concurrent.futures.Future()
            self._waiters.append(turn)
        try:
            await asyncio.wrap_future(turn)
        except BaseException:
            # Cancelled while waiting: a turn handed over meanwhile goes to the next one.
            # (_release pops and grants a turn under the lock, so here it is either still
            # waiting, or was skipped as cancelled, or was granted.)
            with self._lock:
                waiting = turn in self._waiters
                if waiting:
                    self._waiters.remove(turn)
                    turn.cancel()
                granted = not waiting and turn.done() and not turn.cancelled()
            if granted:
                self._release()
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._release()

    def _release(self) -> None:
        with self._lock:
            while self._waiters:
                turn = self._waiters.popleft()
                if turn.set_running_or_notify_cancel():
                    turn.set_result(None)  # the slot passes straight to the waiter
                    return
            self._free += 1
