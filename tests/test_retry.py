"""The one retry policy: attempts, a window, backoff with jitter, what is retryable."""

from __future__ import annotations

import asyncio
import random

import pytest

from agentsgym.retry import Attempts
from agentsgym.runtime import RetryPolicy, retry_async, retry_sync


class FakeTime:
    """A clock that only the runner's sleeps move."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    async def asleep(self, seconds: float) -> None:
        self.sleep(seconds)


class Flaky(Exception):
    def __init__(self, retry_after: float | None = None) -> None:
        super().__init__("flaky")
        self.retry_after = retry_after


def failing(times: int, error: Exception | None = None) -> tuple[list[int], object]:
    calls: list[int] = []

    def call() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error or Flaky()
        return "ok"

    return calls, call


def test_a_retryable_failure_is_retried_until_the_call_succeeds() -> None:
    fake = FakeTime()
    calls, call = failing(3)
    policy = RetryPolicy(max_attempts=5, retry_window=None, backoff=1.0, max_backoff=3.0)
    result = retry_sync(
        call,
        policy,
        retryable=lambda e: isinstance(e, Flaky),
        clock=fake.clock,
        sleep=fake.sleep,
        rng=random.Random(0),
    )  # type: ignore[arg-type]
    assert result == "ok" and len(calls) == 4
    ceilings = [1.0, 2.0, 3.0]  # doubling, up to max_backoff
    assert all(c / 2 <= s <= c for s, c in zip(fake.sleeps, ceilings, strict=True))


def test_the_attempts_bound_a_call_and_give_up_says_how_it_went() -> None:
    fake = FakeTime()
    calls, call = failing(10)
    seen: list[Attempts] = []

    def give_up(exc: Exception, how: Attempts) -> BaseException:
        seen.append(how)
        return RuntimeError(f"gave up after {how.attempts}")

    with pytest.raises(RuntimeError, match="gave up after 3") as raised:
        retry_sync(
            call,
            RetryPolicy(max_attempts=3, retry_window=None),
            retryable=lambda e: True,
            give_up=give_up,
            clock=fake.clock,
            sleep=fake.sleep,
        )  # type: ignore[arg-type]
    assert len(calls) == 3 and seen[0].exhausted == "attempts"
    assert raised.value.__cause__ is None  # the transport's error (a URL's key) is not chained


def test_the_window_ends_retries_with_one_last_attempt_at_its_edge() -> None:
    fake = FakeTime()
    calls, call = failing(1000)
    how: list[Attempts] = []
    with pytest.raises(Flaky):
        asyncio.run(
            retry_async(
                lambda: asyncio.sleep(0, call()),  # type: ignore[operator]
                RetryPolicy(retry_window=10.0, backoff=1.0, max_backoff=4.0),
                retryable=lambda e: True,
                give_up=lambda e, h: how.append(h) or e,  # type: ignore[func-returns-value]
                clock=fake.clock,
                sleep=fake.asleep,
            )
        )
    assert sum(fake.sleeps) == pytest.approx(10.0)  # the last wait ends at the edge
    assert how[0].exhausted == "window" and how[0].attempts == len(calls)


def test_a_failure_that_is_not_retryable_goes_through_at_once() -> None:
    fake = FakeTime()
    calls, call = failing(5, ValueError("refused"))
    with pytest.raises(ValueError, match="refused"):
        retry_sync(call, RetryPolicy(), retryable=lambda e: False, sleep=fake.sleep)  # type: ignore[arg-type]
    assert len(calls) == 1 and fake.sleeps == []


def test_a_zero_window_never_retries() -> None:
    calls, call = failing(5)
    with pytest.raises(Flaky):
        retry_sync(call, RetryPolicy(retry_window=0), retryable=lambda e: True)  # type: ignore[arg-type]
    assert len(calls) == 1


def test_retry_after_lengthens_the_wait_up_to_max_backoff() -> None:
    policy = RetryPolicy(backoff=0.1, max_backoff=2.0)
    assert policy.delay(1, random.Random(0), retry_after=1.5) == 1.5
    assert policy.delay(1, random.Random(0), retry_after=60) == 2.0


def test_jitter_is_seeded_and_spreads_waits_at_the_ceiling() -> None:
    policy = RetryPolicy(backoff=0.5, max_backoff=10.0)
    delays = [policy.delay(n, random.Random(n)) for n in range(1, 13)]
    assert delays == [policy.delay(n, random.Random(n)) for n in range(1, 13)]
    for n, delay in enumerate(delays, start=1):
        ceiling = min(10.0, 0.5 * 2 ** (n - 1))
        assert ceiling / 2 <= delay <= ceiling
    assert len(set(delays[-4:])) == 4


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"max_attempts": 0}, "max_attempts must be at least 1"),
        ({"retry_window": -1}, "retry_window must be"),
        ({"retry_window": None}, "set retry_window or max_attempts"),
        ({"backoff": -1}, "backoff and max_backoff"),
    ],
)
def test_a_bad_policy_says_what_to_set(options: dict[str, object], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        RetryPolicy(**options)  # type: ignore[arg-type]
