"""The in-flight bound and the shared answers, across tasks, threads and event loops.

Every wait here is on an event the test sets; timeouts are hang guards only.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agentsgym_judge.cache import SharedAnswers
from agentsgym_judge.limit import InFlightLimit

GUARD = 30.0  # seconds: a hang guard, never a measurement


async def settle() -> None:
    """Let every ready task run until it blocks."""
    for _ in range(20):
        await asyncio.sleep(0)


def test_the_limit_admits_callers_in_order_as_others_leave() -> None:
    async def main() -> list[str]:
        limit = InFlightLimit(2)
        order: list[str] = []
        leave = {name: asyncio.Event() for name in "abcd"}

        async def hold(name: str) -> None:
            async with limit:
                order.append(name)
                await leave[name].wait()

        tasks = [asyncio.create_task(hold(name)) for name in "abcd"]
        await settle()
        assert order == ["a", "b"] and limit.in_flight == 2
        leave["b"].set()
        await settle()
        assert order == ["a", "b", "c"] and limit.in_flight == 2
        for event in leave.values():
            event.set()
        await asyncio.wait_for(asyncio.gather(*tasks), GUARD)
        assert limit.in_flight == 0
        return order

    assert asyncio.run(main()) == ["a", "b", "c", "d"]


def test_a_caller_on_another_loop_waits_for_a_slot_freed_on_the_first() -> None:
    limit = InFlightLimit(1)
    holding, release = threading.Event(), threading.Event()

    def other_loop() -> None:
        async def hold() -> None:
            async with limit:
                holding.set()
                await asyncio.get_running_loop().run_in_executor(None, release.wait, GUARD)

        asyncio.run(hold())

    thread = threading.Thread(target=other_loop)
    thread.start()
    assert holding.wait(GUARD)

    async def main() -> int:
        entered = asyncio.Event()

        async def wait_for_slot() -> None:
            async with limit:
                entered.set()

        task = asyncio.create_task(wait_for_slot())
        await settle()
        assert not entered.is_set()  # the other loop holds the only slot
        release.set()
        await asyncio.wait_for(task, GUARD)
        return limit.in_flight

    assert asyncio.run(main()) == 0
    thread.join(GUARD)


def test_a_waiter_cancelled_before_its_turn_leaves_the_count_right() -> None:
    async def main() -> None:
        limit = InFlightLimit(1)
        leave = asyncio.Event()

        async def hold() -> None:
            async with limit:
                await leave.wait()

        holder = asyncio.create_task(hold())
        waiter = asyncio.create_task(hold())
        await settle()
        waiter.cancel()
        await settle()
        leave.set()
        await asyncio.wait_for(holder, GUARD)
        assert waiter.cancelled() and limit.in_flight == 0
        async with limit:
            assert limit.in_flight == 1

    asyncio.run(main())


def test_the_limit_must_admit_someone() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        InFlightLimit(0)


class Asker:
    """An ``ask`` that counts its calls and answers when told to."""

    def __init__(self) -> None:
        self.calls = 0
        self.go = asyncio.Event()

    def __call__(self, answer: Any) -> Callable[[], Awaitable[Any]]:
        async def ask() -> Any:
            self.calls += 1
            await self.go.wait()
            if isinstance(answer, BaseException):
                raise answer
            return answer

        return ask


def test_a_kept_answer_is_reused_without_asking() -> None:
    async def main() -> None:
        answers: SharedAnswers[str] = SharedAnswers(10)
        asker = Asker()
        asker.go.set()
        assert await answers.get("k", asker("first")) == ("first", False)
        assert await answers.get("k", asker("second")) == ("first", True)
        assert asker.calls == 1 and len(answers) == 1

    asyncio.run(main())


def test_a_question_in_flight_is_asked_once_for_everyone() -> None:
    async def main() -> None:
        answers: SharedAnswers[str] = SharedAnswers(10)
        asker = Asker()
        first = asyncio.create_task(answers.get("k", asker("answer")))
        await settle()
        others = [asyncio.create_task(answers.get("k", asker("other"))) for _ in range(3)]
        await settle()
        asker.go.set()
        results = await asyncio.wait_for(asyncio.gather(first, *others), GUARD)
        assert results == [("answer", False)] + [("answer", True)] * 3
        assert asker.calls == 1

    asyncio.run(main())


def test_a_failure_reaches_the_waiters_but_is_not_kept() -> None:
    async def main() -> None:
        answers: SharedAnswers[str] = SharedAnswers(10)
        asker = Asker()
        first = asyncio.create_task(answers.get("k", asker(RuntimeError("server down"))))
        await settle()
        waiter = asyncio.create_task(answers.get("k", asker("unused")))
        await settle()
        asker.go.set()
        for task in (first, waiter):
            with pytest.raises(RuntimeError, match="server down"):
                await asyncio.wait_for(task, GUARD)
        assert await answers.get("k", asker("later")) == ("later", False)
        assert asker.calls == 2 and len(answers) == 1

    asyncio.run(main())


def test_when_the_asker_is_cancelled_a_waiter_asks_instead() -> None:
    async def main() -> None:
        answers: SharedAnswers[str] = SharedAnswers(10)
        asker = Asker()
        first = asyncio.create_task(answers.get("k", asker("never")))
        await settle()
        waiter = asyncio.create_task(answers.get("k", asker("the waiter's")))
        await settle()
        first.cancel()
        await settle()
        asker.go.set()
        assert await asyncio.wait_for(waiter, GUARD) == ("the waiter's", False)
        assert first.cancelled() and asker.calls == 2

    asyncio.run(main())


def test_the_least_recently_used_answer_goes_first() -> None:
    async def main() -> None:
        answers: SharedAnswers[str] = SharedAnswers(2)
        asker = Asker()
        asker.go.set()
        for key in ("a", "b"):
            await answers.get(key, asker(key))
        await answers.get("a", asker("unused"))  # "a" used again: "b" is the oldest
        await answers.get("c", asker("c"))
        assert await answers.get("a", asker("unused")) == ("a", True)
        assert await answers.get("b", asker("b again")) == ("b again", False)
        assert asker.calls == 4

    asyncio.run(main())


def test_size_0_asks_every_time() -> None:
    async def main() -> None:
        answers: SharedAnswers[str] = SharedAnswers(0)
        asker = Asker()
        asker.go.set()
        assert await answers.get("k", asker("one")) == ("one", False)
        assert await answers.get("k", asker("two")) == ("two", False)
        assert asker.calls == 2 and len(answers) == 0

    asyncio.run(main())
