"""The asyncio engine: async and plain agents and hooks, concurrency, timeouts, the
sync facade, and the context agents get. No test here depends on how fast the machine
is: waits are on events, and budgets that must expire guard calls that never return."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

import agentsgym
from agentsgym import StepResult, hookimpl
from agentsgym.aio import run_sync
from agentsgym.engine import DEFAULT_MAX_CONCURRENCY, rollout_seed
from agentsgym.types import EpisodeContext
from envs_for_tests import CountdownEnv, CountingAgent, countdown

TINY = "agentsgym/tiny-chatml"


class AsyncCounter:
    """An async agent that counts down, tracking how many calls are in flight."""

    def __init__(self, gate: asyncio.Event | None = None) -> None:
        self.active = 0
        self.peak = 0
        self.calls = 0
        self.gate = gate

    async def get_action(self, messages: Any, agent_state: Any) -> tuple[str, Any]:
        self.active += 1
        self.calls += 1
        self.peak = max(self.peak, self.active)
        try:
            if self.gate is not None:
                await self.gate.wait()
            else:
                await asyncio.sleep(0)
            last = messages[-1]["content"]
            return "".join(ch for ch in last if ch.isdigit()), agent_state
        finally:
            self.active -= 1


class AsyncCountdownEnv(CountdownEnv):
    """CountdownEnv with async def hooks (as an env calling a remote service has)."""

    @hookimpl
    async def initialize_episode(self, session_id, task_data):
        await asyncio.sleep(0)
        return {"next": int(task_data.get("start", self.config.start))}

    @hookimpl
    async def format_prompt(self, state, step):
        await asyncio.sleep(0)
        return CountdownEnv.format_prompt(self, state, step)

    @hookimpl
    async def step_episode(self, state, action):
        await asyncio.sleep(0)
        return CountdownEnv.step_episode(self, state, action)


def test_an_async_agent_is_awaited_and_every_episode_can_be_in_flight() -> None:
    async def main() -> None:
        gate = asyncio.Event()
        agent = AsyncCounter(gate)
        env = countdown(None)
        run = asyncio.ensure_future(
            env.arun_trial([{"start": 1}] * 256, agent, max_concurrency=256)
        )
        while agent.active < 256 and not run.done():
            await asyncio.sleep(0.01)
        assert agent.active == 256  # all 256 episodes wait on the agent at once
        gate.set()
        batch = await run
        assert len(batch) == 256 and not batch.failed
        assert batch.final_rewards == [1.5] * 256

    asyncio.run(main())


def test_plain_agents_run_in_a_pool_sized_to_max_concurrency() -> None:
    assert DEFAULT_MAX_CONCURRENCY >= 64
    release = threading.Event()
    lock = threading.Lock()
    state = {"waiting": 0, "peak": 0}

    class Blocking:
        """Blocks every call until the default number of calls wait at once."""

        def get_action(self, messages, agent_state):
            with lock:
                state["waiting"] += 1
                state["peak"] = max(state["peak"], state["waiting"])
                if state["waiting"] >= DEFAULT_MAX_CONCURRENCY:
                    release.set()
            try:
                assert release.wait(60), "the pool never held the default number of calls"
            finally:
                with lock:
                    state["waiting"] -= 1
            last = messages[-1]["content"]
            return "".join(ch for ch in last if ch.isdigit()), agent_state

    batch = countdown(None).run_trial([{"start": 1}] * (DEFAULT_MAX_CONCURRENCY + 16), Blocking())
    assert not batch.failed
    assert state["peak"] == DEFAULT_MAX_CONCURRENCY  # the default, never more


def test_async_hooks_give_the_same_trajectories_as_plain_ones() -> None:
    tokenizer = agentsgym.load_tokenizer(TINY)
    plain = CountdownEnv(tokenizer=tokenizer, env_config={})
    async_env = AsyncCountdownEnv(tokenizer=tokenizer, env_config={})
    tasks = [{"start": 3}, {"start": 1}]
    first = plain.run_trial(tasks, CountingAgent(), num_rollouts=2)
    second = async_env.run_trial(tasks, AsyncCounter(), num_rollouts=2)
    assert not first.failed and not second.failed
    assert second.padded_full_token_ids == first.padded_full_token_ids
    assert second.padded_agent_token_mask == first.padded_agent_token_mask
    assert second.padded_per_token_rewards == first.padded_per_token_rewards
    assert [e.messages for e in second.episodes] == [e.messages for e in first.episodes]


def test_a_slow_plain_hook_does_not_stall_other_episodes_agent_calls() -> None:
    """The slow hook waits until another episode's agent has answered many times: if
    the hook held the event loop, that could never happen (the hook would time out)."""
    progress = threading.Event()

    class SlowFirstStep(CountdownEnv):
        @hookimpl
        def step_episode(self, state, action, step):
            if state["next"] == 9:  # only the slow task's episode
                assert progress.wait(60), "other episodes made no progress while this hook ran"
            return CountdownEnv.step_episode(self, state, action)

    calls = {"n": 0}

    async def agent_calls(messages, agent_state):
        calls["n"] += 1
        if calls["n"] >= 20:
            progress.set()
        await asyncio.sleep(0)
        last = messages[-1]["content"]
        return "".join(ch for ch in last if ch.isdigit()), agent_state

    class Agent:
        get_action = staticmethod(agent_calls)

    env = SlowFirstStep(env_config={"max_steps_per_episode": 10})
    batch = env.run_trial([{"start": 9}] + [{"start": 3}] * 10, Agent())
    assert not batch.failed and progress.is_set()


def test_a_hung_hook_fails_its_episode_with_a_timeout_and_the_batch_does_not_wait() -> None:
    release = threading.Event()
    returned = threading.Event()

    class Hangs(CountdownEnv):
        @hookimpl
        def step_episode(self, state, action):
            release.wait(120)
            returned.set()
            return CountdownEnv.step_episode(self, state, action)

    hung = Hangs(env_config={"hook_timeout_seconds": 0.2})
    try:
        hung_batch = hung.run_trial([{"start": 2}], CountingAgent())
        # the run returned while the hook is still blocked in its worker thread
        assert not returned.is_set()
        ok_batch = countdown(None).run_trial([{"start": 2}] * 3, CountingAgent())
    finally:
        release.set()
    [failed] = hung_batch.failed
    assert failed.error.startswith("EpisodeTimeoutError")
    assert "step_episode" in failed.error and "hook_timeout_seconds=0.2" in failed.error
    assert not ok_batch.failed and ok_batch.final_rewards == [2.0] * 3
    # the abandoned hook returns later; nothing of it reaches the recorded episode
    assert returned.wait(30)
    time.sleep(0.05)
    assert failed.steps == [] and len(failed.messages) == 3


def test_an_episode_over_its_budget_fails_and_finish_episode_still_runs() -> None:
    finished: list[str | None] = []

    class Tracks(CountdownEnv):
        @hookimpl
        def finish_episode(self, error):
            finished.append(error)

    class NeverAnswers:
        async def get_action(self, messages, agent_state):
            await asyncio.sleep(3600)

    env = Tracks(env_config={"episode_timeout_seconds": 0.2})
    batch = env.run_trial([{"start": 2}], NeverAnswers())
    [failed] = batch.failed
    assert failed.error.startswith("EpisodeTimeoutError")
    assert "episode_timeout_seconds=0.2" in failed.error and "the agent" in failed.error
    assert finished == [failed.error]


def test_run_trial_works_inside_a_running_event_loop_like_a_notebook() -> None:
    async def notebook_cell() -> list[float]:
        env = countdown(None)
        return env.run_trial([{"start": 2}], CountingAgent()).final_rewards  # a plain call

    assert asyncio.run(notebook_cell()) == [2.0]


def test_run_sync_refuses_to_wait_for_its_own_loop() -> None:
    async def nested() -> None:
        async def inner() -> int:
            return 1

        run_sync(inner())

    with pytest.raises(RuntimeError, match="wait for itself forever"):
        run_sync(nested())


def test_agents_that_ask_get_their_episode_context() -> None:
    seen: list[EpisodeContext] = []
    lock = threading.Lock()

    class Seeded:
        def get_action(self, messages, agent_state, *, context):
            with lock:
                seen.append(context)
            last = messages[-1]["content"]
            return "".join(ch for ch in last if ch.isdigit()), agent_state

    env = countdown(None, episodes_per_trial=2)
    env.run_trial([{"start": 2}, {"start": 1}], Seeded(), num_rollouts=3, seed=7)
    assert {(c.task_index, c.rollout_index, c.episode_index) for c in seen} == {
        (t, r, e) for t in range(2) for r in range(3) for e in range(2)
    }
    by_rollout: dict[tuple[int, int], set[int]] = {}
    for context in seen:
        by_rollout.setdefault((context.task_index, context.rollout_index), set()).add(context.seed)
        assert context.env_id == env.env_id
    assert all(len(seeds) == 1 for seeds in by_rollout.values())  # one seed per rollout
    assert len({next(iter(s)) for s in by_rollout.values()}) == 6  # different across rollouts
    steps = sorted(c.step for c in seen if (c.task_index, c.rollout_index, c.episode_index) == (0, 0, 0))
    assert steps == [0, 1]
    # the same in every run: derived from the run seed, env, task and rollout index
    assert by_rollout[(0, 1)] == {rollout_seed(7, env.env_id, {"start": 2}, 1)}
    assert rollout_seed(8, env.env_id, {"start": 2}, 1) != rollout_seed(7, env.env_id, {"start": 2}, 1)


def test_the_runs_concurrency_flows_to_an_agent_that_follows_it() -> None:
    class Follower(AsyncCounter):
        limit: int | None = None

        def follow_concurrency(self, max_concurrency: int) -> None:
            self.limit = max_concurrency

    agent = Follower()
    countdown(None).run_trial([{"start": 1}], agent, max_concurrency=17)
    assert agent.limit == 17

    openai_agent = pytest.importorskip("agentsgym.agents.openai_agent")
    follows = openai_agent.OpenAIAgent(base_url="http://127.0.0.1:9/v1", model="m")
    follows.follow_concurrency(200)
    assert follows.max_concurrency == 200
    explicit = openai_agent.OpenAIAgent(base_url="http://127.0.0.1:9/v1", model="m", max_concurrency=5)
    explicit.follow_concurrency(200)
    assert explicit.max_concurrency == 5


def test_rows_of_different_envs_share_one_pool_of_slots() -> None:
    async def main() -> None:
        gate = asyncio.Event()
        agent = AsyncCounter(gate)
        rows = [
            {"env_class_path": "agentsgym/GuessTheNumber-v0", "env_config": {}, "task_data": {"seed": i}}
            for i in range(3)
        ] + [
            {"env_class_path": "agentsgym/GuessTheNumber-v0", "env_config": {"high": 10}, "task_data": {"seed": i}}
            for i in range(3)
        ]
        from agentsgym.dataset_runner import arun_dataset

        run = asyncio.ensure_future(arun_dataset(rows, agent, num_rollouts=2, max_concurrency=64))
        while agent.active < 12 and not run.done():
            await asyncio.sleep(0.01)
        assert agent.active == 12  # both envs' trials are in flight together
        gate.set()
        batch = await run
        assert len(batch.groups) == 6 and not batch.failed

    asyncio.run(main())


def test_an_async_agent_from_plain_code_goes_through_call_agent() -> None:
    from agentsgym.agents import call_agent

    action, state = call_agent(AsyncCounter(), [{"role": "user", "content": "Say 3."}], "s")
    assert action.text == "3" and state == "s"
    # called the wrong way, the agent's coroutine is reported, not unpacked
    with pytest.raises(agentsgym.errors.AgentError, match="must be awaited"):
        agentsgym.agents.base.as_action(AsyncCounter(), AsyncCounter().get_action([], None))


def test_step_results_from_async_hooks_are_validated_like_plain_ones() -> None:
    class BadAsync(AsyncCountdownEnv):
        @hookimpl
        async def step_episode(self, state, action):
            return StepResult(state, float("nan"), False, {})

    [failed] = BadAsync(env_config={}).run_trial([{"start": 1}], AsyncCounter()).failed
    assert "non-finite reward" in failed.error


def test_rows_of_a_mixed_dataset_play_with_their_own_envs_agents() -> None:
    rows = [
        {"env_class_path": "agentsgym/GuessTheNumber-v0", "env_config": {}, "task_data": {"seed": 1}},
        {"env_class_path": "tests_countdown", "env_config": {}, "task_data": {"start": 2}},
    ]
    countdown_agent = CountingAgent()
    env_cache = {("tests_countdown", "{}"): countdown(None)}
    batch = agentsgym.runtime.run_dataset(
        rows,
        None,
        agents={
            "agentsgym/GuessTheNumber-v0": agentsgym.make_agent("agentsgym/bisect"),
            "tests_countdown": countdown_agent,
        },
        envs=env_cache,
    )
    assert not batch.failed and batch.final_rewards == [1.0, 2.0]
    assert countdown_agent.calls == 2  # only the countdown row used it
    with pytest.raises(ValueError, match="no agent for the rows of agentsgym/GuessTheNumber-v0"):
        agentsgym.runtime.run_dataset(rows, None, agents={"tests_countdown": countdown_agent}, envs=env_cache)
