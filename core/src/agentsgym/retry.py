"""One retry policy: how often, how long and how far apart a failed call is tried again.

Every client of agentsgym that talks to another process (the OpenAI agent, the remote
envs, the Atropos producer) retries with this policy and one of these runners, so they
agree on what "a retry window" and "backoff" mean:

* **attempts**: ``max_attempts`` tries at most, the first included (``None``: as many
  as the window holds);
* **window**: no retry starts later than ``retry_window`` seconds after the call's
  first attempt started; the last wait is shortened to end at the window's edge, so a
  call is tried once more right there (``None``: no window, only attempts bound it;
  ``0``: never retried);
* **backoff**: the wait after failed attempt ``n`` is ``backoff * 2**(n-1)`` seconds,
  at most ``max_backoff``, times a random factor in [0.5, 1] ("equal jitter": clients
  that lost the same server do not all come back at the same instant); a server's
  ``Retry-After`` lengthens it, up to ``max_backoff``;
* **what is retryable** is the caller's to say (``retryable(exc)``): a refused request
  does not change by being sent again, a lost connection may.

The clock, the sleep and the random generator are arguments, so a test plays an
outage of minutes in no time and gets the same waits every run.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

__all__ = ["Attempts", "RetryPolicy", "retry_async", "retry_sync"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

Retryable = Callable[[Exception], bool]
"""Whether a failed attempt may be sent again; an exception with a ``retry_after``
attribute (seconds, or ``None``) also says how long the server asked to wait."""


@dataclass(frozen=True)
class Attempts:
    """How a call went when it finally failed: what :func:`retry_async` gives ``give_up``.

    :param attempts: attempts made, the first included.
    :param elapsed: seconds since the first attempt started.
    :param exhausted: ``"attempts"`` or ``"window"`` when the policy stopped retrying
        a retryable failure; ``None`` when the failure was not retryable.
    """

    attempts: int
    elapsed: float
    exhausted: Literal["attempts", "window"] | None


GiveUp = Callable[[Exception, Attempts], BaseException]
"""The exception to raise for the last failure of a call (default: that failure)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How hard a call is tried before it fails (see the module docstring).

    :param retry_window: seconds after a call's first attempt during which a
        retryable failure is retried (``None``: no limit but ``max_attempts``).
    :param max_attempts: attempts per call at most, the first included (``None``: as
        many as the window holds).
    :param backoff: seconds before the first retry; doubled for each next one.
    :param max_backoff: the longest wait between two attempts.
    """

    retry_window: float | None = 60.0
    max_attempts: int | None = None
    backoff: float = 0.1
    max_backoff: float = 2.0

    def __post_init__(self) -> None:
        if self.retry_window is not None and not self.retry_window >= 0:
            raise ValueError(
                f"retry_window must be a number of seconds >= 0 (or None for no window), "
                f"got {self.retry_window}"
            )
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError(
                f"max_attempts must be at least 1 (the first attempt counts), got "
                f"{self.max_attempts}"
            )
        if self.retry_window is None and self.max_attempts is None:
            raise ValueError("set retry_window or max_attempts: a call must end somewhere")
        if not (self.backoff >= 0 and self.max_backoff >= 0):
            raise ValueError(
                f"backoff and max_backoff must be seconds >= 0, got {self.backoff} and "
                f"{self.max_backoff}"
            )

    def delay(
        self, attempt: int, rng: random.Random | None = None, retry_after: float | None = None
    ) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (from 1)."""
        ceiling = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
        wait = ceiling * (rng or random).uniform(0.5, 1.0)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_backoff))
        return wait


class _Schedule:
    """The bookkeeping of one call's attempts, shared by the async and the sync runner."""

    def __init__(
        self,
        policy: RetryPolicy,
        retryable: Retryable,
        give_up: GiveUp | None,
        on_retry: Callable[[Exception, int, float], None] | None,
        clock: Callable[[], float],
        rng: random.Random | None,
    ) -> None:
        self.policy = policy
        self.retryable = retryable
        self.give_up = give_up
        self.on_retry = on_retry
        self.clock = clock
        self.rng = rng
        self.start = clock()
        self.attempts = 0

    def failed(self, exc: Exception) -> float:
        """The wait before the next attempt, or raises the call's final error."""
        self.attempts += 1
        policy = self.policy
        elapsed = self.clock() - self.start
        if not self.retryable(exc):
            self._raise(exc, elapsed, None)
        if policy.max_attempts is not None and self.attempts >= policy.max_attempts:
            self._raise(exc, elapsed, "attempts")
        wait = policy.delay(self.attempts, self.rng, getattr(exc, "retry_after", None))
        if policy.retry_window is not None:
            if elapsed >= policy.retry_window:
                self._raise(exc, elapsed, "window")
            wait = min(wait, policy.retry_window - elapsed)
        if self.on_retry is not None:
            self.on_retry(exc, self.attempts, wait)
        else:
            logger.info("attempt %d failed (%s); retrying in %.2f s", self.attempts, exc, wait)
        return wait

    def _raise(
        self, exc: Exception, elapsed: float, exhausted: Literal["attempts", "window"] | None
    ) -> None:
        if self.give_up is None:
            raise exc
        final = self.give_up(exc, Attempts(self.attempts, elapsed, exhausted))
        if final is exc:
            raise exc
        # The final error says what failed; the transport's own exception may carry a
        # URL's credentials, so it is not chained to it.
        raise final from None


async def retry_async(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    retryable: Retryable,
    give_up: GiveUp | None = None,
    on_retry: Callable[[Exception, int, float], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    rng: random.Random | None = None,
) -> T:
    """``await call()``, tried again by ``policy`` while it fails retryably.

    :param retryable: whether a failure may be retried (an exception that is not an
        :class:`Exception`, a cancellation, always goes through at once).
    :param give_up: the exception to raise for the last failure, given how the call
        went (default: the failure itself).
    :param on_retry: told of each retry (the failure, attempts so far, the wait);
        default: an INFO log line.
    :param clock, sleep, rng: the monotonic clock, the wait and the jitter's random
        generator (a test passes fakes).
    """
    schedule = _Schedule(policy, retryable, give_up, on_retry, clock, rng)
    while True:
        try:
            return await call()
        except Exception as exc:  # noqa: BLE001 (sorted by retryable; raised when final)
            wait = schedule.failed(exc)
        await sleep(wait)


def retry_sync(
    call: Callable[[], T],
    policy: RetryPolicy,
    *,
    retryable: Retryable,
    give_up: GiveUp | None = None,
    on_retry: Callable[[Exception, int, float], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
    rng: random.Random | None = None,
) -> T:
    """:func:`retry_async` for plain code (a constructor that cannot await)."""
    schedule = _Schedule(policy, retryable, give_up, on_retry, clock, rng)
    while True:
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 (sorted by retryable; raised when final)
            wait = schedule.failed(exc)
        sleep(wait)
