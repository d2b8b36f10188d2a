"""How the runner calls an env's hooks: the direct call that skips pluggy's generic path
must give pluggy's results, and envs that declare ``run_hooks_inline`` have their turns
run on the event loop, with the same trajectories, budgets that still fail an episode,
and a way back to worker threads for an env that broke its promise."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pluggy
import pytest

import agentsgym
from agentsgym import RewardTerm, hookimpl
from agentsgym.engine import HookRuntime, hook_runtime
from agentsgym.worker_pool import WorkerPool
from envs_for_tests import CountdownEnv, CountingAgent

TINY = "agentsgym/tiny-chatml"


class Recorder:
    """The calls each hook got, through a cross-cutting plugin."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    @hookimpl
    def reward_shaping(self, action: str) -> RewardTerm:
        self.calls.append(action)
        return RewardTerm("seen", 0.1)


class StepWrapper:
    @hookimpl(wrapper=True)
    def step_episode(self, action: str) -> Any:
        state, reward, done, info = yield
        return state, reward, done, {**info, "wrapped": action}


class OldStyleWrapper:
    @hookimpl(hookwrapper=True)
    def format_prompt(self, step: int) -> Any:
        outcome = yield
        outcome.force_result(
            f"{outcome.get_result()} (old-style wrapper saw step {step})"
            if isinstance(outcome.get_result(), str)
            else outcome.get_result()
        )


class ReturnsNone:
    @hookimpl
    def reward_shaping(self) -> None:
        return None


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("initialize_episode", {"session_id": "s", "task_data": {"start": 3}}),
    ("format_prompt", {"state": {"next": 3}, "step": 0}),
    ("format_prompt", {"state": {"next": 2}, "step": 1}),
    ("step_episode", {"state": {"next": 3}, "action": "3", "step": 0, "reply": None}),
    ("step_episode", {"state": {"next": 3}, "action": "7", "step": 0, "reply": None}),
    (
        "reward_shaping",
        {"state": {"next": 3}, "action": "3", "step_result": None, "step": 0, "reply": None},
    ),
    (
        "finish_episode",
        {"state": {"next": 0}, "truncated": False, "error": None, "session_id": "s"},
    ),
]


@pytest.mark.parametrize(
    "plugins",
    [
        (),
        (Recorder(),),
        (Recorder(), ReturnsNone()),
        (StepWrapper(),),
        (OldStyleWrapper(),),
        (ReturnsNone(),),
    ],
    ids=["env only", "one extra", "two extra", "wrapper", "hookwrapper", "returns None"],
)
def test_hook_calls_give_what_pluggy_gives(plugins: tuple[Any, ...]) -> None:
    env = CountdownEnv(env_config={}, plugins=plugins)
    runtime = HookRuntime(env, WorkerPool(1))
    for name, kwargs in CALLS:
        expected = getattr(env.hook, name)(env=env, **kwargs)
        got = asyncio.run(runtime.call(name, **kwargs))
        assert got == expected, name


def test_a_traced_plugin_manager_sees_every_hook_call() -> None:
    env = CountdownEnv(env_config={})
    seen: list[str] = []
    env.plugin_manager.add_hookcall_monitoring(
        lambda name, impls, kwargs: seen.append(name), lambda *args: None
    )
    episode = env.run_trial([{"start": 2}], CountingAgent()).episodes[0]
    assert episode.final_reward == 2.0
    assert seen.count("step_episode") == 2 and seen.count("format_prompt") == 2
    assert seen.count("reward_shaping") == 2 and seen.count("finish_episode") == 1


def test_tracing_turns_the_direct_call_off_until_it_is_undone() -> None:
    """The direct call relies on pluggy's public API only: a manager that monitors or
    traces its calls (both through add_hookcall_monitoring) goes through pluggy."""
    env = CountdownEnv(env_config={})
    runtime = HookRuntime(env, WorkerPool(1))
    seen: list[str] = []
    env.plugin_manager.trace.root.setwriter(seen.append)
    undo = env.plugin_manager.enable_tracing()
    asyncio.run(runtime.call("format_prompt", state={"next": 3}, step=0))
    assert any("format_prompt" in line for line in seen)
    undo()
    undo()  # undoing twice is harmless and counts once
    assert env.plugin_manager.active_monitors == 0
    seen.clear()
    asyncio.run(runtime.call("format_prompt", state={"next": 3}, step=0))
    assert seen == []


@pytest.mark.filterwarnings("ignore:Argument.*cannot be found in this hook call")
def test_a_missing_argument_is_pluggys_error() -> None:
    class NeedsMore:
        @hookimpl
        def reward_shaping(self, step_result: Any) -> None:
            return None

    env = CountdownEnv(env_config={}, plugins=[NeedsMore()])
    runtime = HookRuntime(env, WorkerPool(1))
    with pytest.raises(pluggy.HookCallError, match="step_result"):
        asyncio.run(runtime.call("reward_shaping", state={}, action="1"))


class ThreadRecording(CountdownEnv):
    """CountdownEnv that notes which thread each step ran in."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.threads: list[str] = []

    @hookimpl
    def step_episode(self, state: Any, action: str) -> Any:
        self.threads.append(threading.current_thread().name)
        return CountdownEnv.step_episode(self, state, action)


class InlineCountdown(ThreadRecording):
    run_hooks_inline = True


def test_inline_turns_run_on_the_loop_and_give_the_same_trajectories() -> None:
    tokenizer = agentsgym.load_tokenizer(TINY)
    threaded = ThreadRecording(tokenizer=tokenizer, env_config={})
    inline = InlineCountdown(tokenizer=tokenizer, env_config={})
    tasks = [{"start": 3}, {"start": 2}]
    first = threaded.run_trial(tasks, CountingAgent(), num_rollouts=2)
    second = inline.run_trial(tasks, CountingAgent(), num_rollouts=2)
    assert not first.failed and not second.failed
    assert second.padded_full_token_ids == first.padded_full_token_ids
    assert second.padded_agent_token_mask == first.padded_agent_token_mask
    assert second.padded_per_token_rewards == first.padded_per_token_rewards
    assert [e.messages for e in second.episodes] == [e.messages for e in first.episodes]
    assert set(inline.threads) == {"agentsgym-loop"}
    assert all(name.startswith("agentsgym-worker") for name in threaded.threads)


def test_an_inline_turn_over_its_budget_fails_its_episode_when_it_returns() -> None:
    class SlowSecondStep(InlineCountdown):
        @hookimpl
        def step_episode(self, state: Any, action: str) -> Any:
            if state["next"] == 1:
                time.sleep(0.3)  # three times the budget: never within it
            return InlineCountdown.step_episode(self, state, action)

    env = SlowSecondStep(env_config={"hook_timeout_seconds": 0.1})
    [failed] = env.run_trial([{"start": 2}], CountingAgent()).failed
    assert failed.error.startswith("EpisodeTimeoutError")
    assert "hook_timeout_seconds=0.1" in failed.error and "inline turn" in failed.error


def test_an_inline_env_whose_turn_stalls_the_loop_goes_back_to_threads(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(hook_runtime, "INLINE_TURN_LIMIT_SECONDS", 0.0)  # every turn is "slow"
    env = InlineCountdown(env_config={})
    with caplog.at_level(logging.DEBUG, logger="agentsgym.engine.hook_runtime"):
        batch = env.run_trial([{"start": 3}], CountingAgent())
    assert not batch.failed and batch.final_rewards == [2.5]
    # the first turn (initialize + prompt) warms up, unjudged; the second, the first step,
    # stalled the loop: every step after it ran in a worker
    assert env.threads[0] == "agentsgym-loop" and len(env.threads) == 3
    assert all(name.startswith("agentsgym-worker") for name in env.threads[1:])
    [warning] = [r for r in caplog.records if "run_hooks_inline" in r.getMessage()]
    assert "worker threads for the rest of this run" in warning.getMessage()
    assert warning.levelno == logging.DEBUG  # the env author's to fix (check_env), not a user's


def test_async_hooks_are_not_made_inline() -> None:
    class AsyncInline(CountdownEnv):
        run_hooks_inline = True

        @hookimpl
        async def format_prompt(self, state: Any, step: int) -> Any:
            await asyncio.sleep(0)
            return CountdownEnv.format_prompt(self, state, step)

    env = AsyncInline(env_config={})
    runtime = HookRuntime(env, WorkerPool(1))
    assert runtime.is_async and not runtime.inline
    assert env.run_trial([{"start": 2}], CountingAgent()).final_rewards == [2.0]
