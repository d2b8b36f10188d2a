"""EpisodeSession, the one object that plays an episode turn by turn: start gives the
first prompt, each step an outcome and the next prompt, finish the closing state. The
local engine is a driver of it, so a session driven by hand must record the very
episode the engine records."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

import agentsgym
from agentsgym import AgentAction, RewardTerm, hookimpl
from agentsgym.engine import EpisodeSession, HookRuntime, TurnOutcome, WorkerPool
from agentsgym.errors import EpisodeError, EpisodeTimeoutError
from agentsgym.trajectory import Episode
from envs_for_tests import CountdownEnv, CountingAgent

TINY = "agentsgym/tiny-chatml"


class Finishes:
    """A plugin that records what finish_episode was told and adds a term."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    @hookimpl
    def finish_episode(self, state: Any, truncated: bool, error: str | None) -> RewardTerm:
        self.calls.append({"state": state, "truncated": truncated, "error": error})
        return RewardTerm("closing", 0.25)


PEEK = {"type": "function", "function": {"name": "peek", "parameters": {}}}


class PeekToolbox:
    """A toolbox answering a reply that says ``peek`` with the counter's value."""

    def __init__(self, start: int) -> None:
        self.start = start
        self.schemas = [PEEK]

    async def respond(self, action: AgentAction) -> Any:
        if "peek" not in action.text:
            return None
        call = {"id": "call_0", "type": "function", "function": {"name": "peek", "arguments": {}}}
        reply = {"role": "assistant", "content": "", "tool_calls": [call]}
        result = {"role": "tool", "tool_call_id": "call_0", "name": "peek"}
        return reply, [{**result, "content": f"the counter starts at {self.start}"}]


class PeekCountdownEnv(CountdownEnv):
    """Countdown with a ``peek`` tool; counts its step_episode calls."""

    stepped = 0

    def episode_tools(self, task_data: dict[str, Any]) -> PeekToolbox:
        return PeekToolbox(int(task_data["start"]))

    @hookimpl
    def step_episode(self, state: dict[str, Any], action: str) -> Any:
        type(self).stepped += 1
        return CountdownEnv.step_episode(self, state, action)


def session_of(env: Any, task: dict[str, Any], **kwargs: Any) -> EpisodeSession:
    return EpisodeSession(env, "s-1", task, runtime=HookRuntime(env, WorkerPool(2)), **kwargs)


def record(episode: Episode) -> dict[str, Any]:
    row = episode.to_record()
    row.pop("session_id")
    return json.loads(json.dumps(row, default=str))


def test_a_session_driven_by_hand_records_the_engines_episode() -> None:
    env = CountdownEnv(tokenizer=agentsgym.load_tokenizer(TINY), env_config={})

    async def drive() -> tuple[list[Any], list[TurnOutcome], Any]:
        session = session_of(env, {"start": 2})
        first = await session.start()
        outcomes = [await session.step(AgentAction("2"))]
        assert not session.over and session.steps_taken == 1
        outcomes.append(await session.step(AgentAction("1")))
        return first, outcomes, await session.finish()

    first, (one, two), finished = asyncio.run(drive())
    assert [m["role"] for m in first] == ["system", "user"] and first[1]["content"] == "Say 2."
    assert (one.reward, one.done, one.truncated, one.info) == (0.5, False, False, {"right": True})
    assert one.messages == [{"role": "user", "content": "Now say 1."}] and one.tool_results is None
    assert two.done and two.over and two.messages == [] and two.reward == 1.5
    assert finished.terms == {} and finished.error is None
    played = env.run_trial([{"start": 2}], CountingAgent()).episodes[0]
    assert record(finished.episode) == record(played)
    assert finished.episode.segments[0].token_ids.tolist() == played.full_token_ids


def test_a_tool_turn_answers_the_call_and_the_results_are_the_next_prompt() -> None:
    env = PeekCountdownEnv(env_config={})
    PeekCountdownEnv.stepped = 0

    async def drive() -> tuple[EpisodeSession, TurnOutcome, TurnOutcome]:
        session = session_of(env, {"start": 2})
        await session.start()
        with pytest.raises(EpisodeError, match="has no roles; leave role out"):
            await session.step(AgentAction("let me peek"), role="counter")
        assert not session.over  # a refused action changes nothing
        peeked = await session.step(AgentAction("let me peek"))
        counted = await session.step(AgentAction("2"))
        return session, peeked, counted

    session, peeked, counted = asyncio.run(drive())
    assert PeekCountdownEnv.stepped == 1  # the tool turn never reached step_episode
    assert peeked.tool_results == peeked.messages
    assert peeked.messages[0]["role"] == "tool" and "starts at 2" in peeked.messages[0]["content"]
    assert (peeked.reward, peeked.terms, peeked.done) == (0.0, {}, False)
    assert peeked.info == {"tool_calls": 1} and peeked.role is None
    assert session.tools == (PEEK,)
    assert session.view().messages[2]["tool_calls"][0]["function"]["name"] == "peek"  # as parsed
    assert counted.reward == 0.5 and counted.messages[0]["content"] == "Now say 1."
    assert session.steps_taken == 2  # tool turns count toward max_steps_per_episode


def test_the_step_limit_truncates_and_finish_is_told() -> None:
    finishes = Finishes()
    env = CountdownEnv(env_config={"max_steps_per_episode": 1}, plugins=[finishes])

    async def drive() -> tuple[TurnOutcome, Any]:
        session = session_of(env, {"start": 3})
        await session.start()
        outcome = await session.step(AgentAction("7"))  # wrong: the env goes on
        with pytest.raises(EpisodeError, match="is over"):
            await session.step(AgentAction("3"))
        return outcome, await session.finish()

    outcome, finished = asyncio.run(drive())
    assert outcome.truncated and not outcome.done and outcome.over and outcome.messages == []
    assert finishes.calls == [{"state": {"next": 3}, "truncated": True, "error": None}]
    assert finished.terms == {"closing": 0.25}
    assert finished.episode.truncated and finished.episode.steps[-1].reward == 0.25
    assert finished.episode.final_reward == 0.25 and finished.episode.ok


def test_a_failing_hook_is_recorded_raised_and_finish_still_runs_once() -> None:
    finishes = Finishes()
    env = CountdownEnv(env_config={}, plugins=[finishes])

    async def drive() -> tuple[Any, Any]:
        session = session_of(env, {"start": 2})
        await session.start()
        await session.step(AgentAction("2"))
        with pytest.raises(RuntimeError, match="the env exploded"):
            await session.step(AgentAction("boom"))
        assert session.over and session.phase == "step_episode"
        return await session.finish(), await session.finish()

    finished, again = asyncio.run(drive())
    assert again is finished and len(finishes.calls) == 1
    error = "RuntimeError: the env exploded"
    assert finished.episode.error == error and finishes.calls[0]["error"] == error
    # an episode with an error keeps its step rewards as they were: no finish terms added
    assert finished.terms == {"closing": 0.25} and finished.episode.steps[-1].reward == 0.5
    assert finished.error is None  # finish_episode itself did not fail


def test_a_driver_records_its_own_failure_and_may_end_the_episode_early() -> None:
    finishes = Finishes()
    env = CountdownEnv(env_config={}, plugins=[finishes])

    async def drive() -> Any:
        session = session_of(env, {"start": 3})
        await session.start()
        await session.step(AgentAction("3"))
        session.fail(ValueError("the agent broke"))
        session.fail(ValueError("a later failure"))  # the first one wins
        return await session.finish(truncated=True)

    finished = asyncio.run(drive())
    assert finished.episode.error == "ValueError: the agent broke"
    assert finishes.calls[0]["error"] == "ValueError: the agent broke"
    assert finishes.calls[0]["truncated"] and finished.episode.truncated


def test_finish_tells_finish_episode_the_drivers_error_and_records_it() -> None:
    finishes = Finishes()
    env = CountdownEnv(env_config={}, plugins=[finishes])

    async def drive() -> Any:
        session = session_of(env, {"start": 3})
        await session.start()
        return await session.finish(error="session closed: idle for 600 s (reaped)")

    finished = asyncio.run(drive())
    assert finishes.calls[0]["error"] == "session closed: idle for 600 s (reaped)"
    assert finished.episode.error == "session closed: idle for 600 s (reaped)"


def test_a_failing_start_is_recorded_and_finish_gets_the_state_it_had() -> None:
    finishes = Finishes()

    class PromptFails(CountdownEnv):
        @hookimpl
        def format_prompt(self, state: Any, step: int) -> Any:
            raise KeyError("no prompt")

    env = PromptFails(env_config={}, plugins=[finishes])

    async def drive() -> Any:
        session = session_of(env, {"start": 3})
        with pytest.raises(KeyError):
            await session.start()
        with pytest.raises(EpisodeError, match="is over"):
            await session.step(AgentAction("3"))
        return await session.finish()

    finished = asyncio.run(drive())
    assert finished.episode.error == "KeyError: 'no prompt'"
    assert finishes.calls[0]["state"] == {"next": 3}  # initialize_episode's state


def test_a_failing_finish_episode_is_recorded_never_raised() -> None:
    class FinishFails(CountdownEnv):
        @hookimpl
        def finish_episode(self) -> None:
            raise OSError("disk full")

    env = FinishFails(env_config={})

    async def drive() -> Any:
        session = session_of(env, {"start": 1})
        await session.start()
        await session.step(AgentAction("1"))
        return await session.finish()

    finished = asyncio.run(drive())
    assert finished.error == "finish_episode: OSError: disk full"
    assert finished.episode.error == "EpisodeError: finish_episode: OSError: disk full"
    assert finished.episode.final_reward == 1.5  # the steps are still scored


def test_a_hook_over_its_budget_abandons_the_turn() -> None:
    release = threading.Event()

    class Hangs(CountdownEnv):
        @hookimpl
        def step_episode(self, state: Any, action: str) -> Any:
            release.wait(120)
            return CountdownEnv.step_episode(self, state, action)

    env = Hangs(env_config={"hook_timeout_seconds": 0.1})

    async def drive() -> tuple[EpisodeSession, Any]:
        session = session_of(env, {"start": 2})
        await session.start()
        with pytest.raises(EpisodeTimeoutError, match="step_episode"):
            await session.step(AgentAction("2"))
        release.set()
        return session, await session.finish()

    try:
        session, finished = asyncio.run(drive())
    finally:
        release.set()
    assert session.abandoned and finished.episode.error.startswith("EpisodeTimeoutError")
    assert finished.episode.steps == []


def test_stepping_before_start_or_starting_twice_is_refused() -> None:
    env = CountdownEnv(env_config={})

    async def drive() -> None:
        session = session_of(env, {"start": 2})
        with pytest.raises(EpisodeError, match="was not started"):
            await session.step(AgentAction("2"))
        await session.start()
        with pytest.raises(EpisodeError, match="new EpisodeSession"):
            await session.start()

    asyncio.run(drive())


def test_an_env_that_cuts_the_episode_short_ends_it_truncated() -> None:
    """A step whose info says ``truncated`` (a remote server at its own limit) ends the
    episode there as the step limit would: truncated, not done, the key not kept."""
    finishes = Finishes()

    class Cut(CountdownEnv):
        @hookimpl
        def step_episode(self, state: Any, action: str) -> Any:
            _, reward, done, info = CountdownEnv.step_episode(self, state, action)
            return state, reward, done, {**info, agentsgym.TRUNCATED_KEY: True}

    env = Cut(env_config={}, plugins=[finishes])

    async def drive() -> tuple[TurnOutcome, Any]:
        session = session_of(env, {"start": 3})
        await session.start()
        outcome = await session.step(AgentAction("3"))
        assert session.over and session.truncated and not session.done
        return outcome, await session.finish()

    outcome, finished = asyncio.run(drive())
    assert outcome.truncated and not outcome.done and outcome.messages == []
    assert outcome.info == {"right": True} == finished.episode.steps[0].info
    assert finished.episode.truncated and finishes.calls[0]["truncated"]
