"""A cancelled run stops: jobs of inline agents, and a Ctrl-C waiting in run_sync."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

import pytest

import agentsgym
from agentsgym import aio
from agentsgym.engine import TrialJob, arun_jobs


def test_a_run_of_inline_episodes_stops_when_cancelled() -> None:
    env = agentsgym.make("agentsgym/GuessTheNumber-v0")
    agent = agentsgym.make_agent("agentsgym/bisect")
    jobs = [TrialJob(env, {"seed": index}, index, 0) for index in range(20)]
    played: list[tuple[int, int]] = []

    async def run() -> None:
        run_task = asyncio.current_task()
        assert run_task is not None

        def cancel_after_the_first(job: TrialJob, episodes: list[Any]) -> None:
            played.append(job.key)
            run_task.cancel()

        await arun_jobs(jobs, agent, max_concurrency=1, on_trial=cancel_after_the_first)

    with pytest.raises(concurrent.futures.CancelledError):
        aio.run_sync(run())
    assert played == [(0, 0)]  # the cancel stopped the run after the trial that asked


def test_ctrl_c_in_run_sync_gives_the_coroutine_its_cleanup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cleaned_up: list[str] = []
    started = asyncio.Event()

    async def long_call() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)  # cleanup that needs the loop, e.g. closing a client
            cleaned_up.append("done")
            raise

    real_result = aio._LoopThread.result
    interrupts = iter([True])

    def interrupted_once(self: Any, future: Any, timeout: float | None = None) -> Any:
        if next(interrupts, False):
            while not started.is_set():  # the call is running when the user presses Ctrl-C
                real_result(self, asyncio.run_coroutine_threadsafe(asyncio.sleep(0), self.loop))
            raise KeyboardInterrupt
        return real_result(self, future, timeout)

    monkeypatch.setattr(aio._LoopThread, "result", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        aio.run_sync(long_call())
    assert cleaned_up == ["done"]
