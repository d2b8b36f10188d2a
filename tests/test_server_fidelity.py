"""On the model-server path the trajectory records what the server's model saw.

The loopback server serves the tiny random model like vLLM: it reports the prompt
ids it conditioned on (``return_token_ids``). The random model samples ids that do
not re-tokenize to themselves, so a chat server that re-renders the conversation
as text conditions on other ids than the episode's stream: the runner must notice
and start a new segment from the server's ids. Audited turn by turn: for every
agent turn, the ids before its tokens in its segment are exactly the ids the server
reported, in both API modes.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("torch")

import agentsgym
from agentsgym import AgentAction, FunctionAgent
from envs_for_tests import CountdownEnv
from recording_agents import RecordingAgent
from tiny_model_server import tiny_model_server

TINY = "agentsgym/tiny-chatml"
GUESS = "agentsgym/GuessTheNumber-v0"

pytestmark = pytest.mark.usefixtures("torch_single_thread")


@pytest.fixture(scope="module")
def server() -> Any:
    with tiny_model_server() as running:
        yield running


@pytest.mark.parametrize(("api", "source"), [("chat", "server"), ("completions", "sampled")])
def test_every_turn_records_the_prompt_the_server_conditioned_on(
    server: Any, api: str, source: str
) -> None:
    agent = RecordingAgent(
        agentsgym.make_agent(
            "openai",
            base_url=server.base_url,
            model="tiny",
            api=api,
            max_tokens=8,
            temperature=1.0,
            max_retries=0,
            timeout=60,
        )
    )
    env = agentsgym.make(GUESS, tokenizer=TINY, env_config={"max_steps_per_episode": 4})
    batch = env.run_trial([{"seed": s} for s in range(6)], agent, num_rollouts=3)
    agent.inner.close()
    assert not batch.failed, batch.failed[0].error
    audited = mismatched = new_segments = flagged = 0
    for episode in batch.all_episodes:
        new_segments += len(episode.segments) - 1
        for step_index, step in enumerate(episode.steps):
            assert step.token_source == source
            reported = agent.reported[(episode.session_id, step_index)]
            assert reported is not None  # the server reported its prompt ids
            segment, start, _ = step.token_span
            recorded = episode.segments[segment].token_ids[:start].tolist()
            audited += 1
            mismatched += recorded != reported
            flagged += bool(step.info.get("server_prompt_mismatch"))
    assert audited >= 6 * 3 * 2
    assert mismatched == 0
    assert flagged == new_segments  # every new segment came from a reported mismatch
    if api == "chat":
        # the random model's ids do not survive the server's re-rendering as text
        assert new_segments > 0
    else:
        assert new_segments == 0  # token-in: the server generates from the stream itself


def test_a_mismatch_is_recorded_on_the_step_and_the_new_segment_holds_the_server_ids() -> None:
    """A scripted server whose prompt ids differ from the stream (another template). The
    first turn's segment replaces the stream's own rendering, which held no agent token:
    no row of the episode is without a token to train."""
    tokenizer = agentsgym.load_tokenizer(TINY)

    def policy(messages: Any, state: Any) -> tuple[AgentAction, Any]:
        other = [7, 7, 7] + list(range(10, 10 + len(messages)))
        return AgentAction(
            text="[50]", token_ids=[5, 6], logprobs=[-1.0, -1.0], prompt_token_ids=other
        ), state

    env = agentsgym.make(GUESS, tokenizer=tokenizer, env_config={"max_steps_per_episode": 2})
    episode = env.run_trial([{"seed": 3}], FunctionAgent(policy)).all_episodes[0]
    assert episode.ok, episode.error
    assert len(episode.segments) == episode.num_turns  # one segment per turn, none empty
    assert all(segment.agent_mask.sum() > 0 for segment in episode.segments)
    for step in episode.steps:
        assert step.info["server_prompt_mismatch"] is True
        segment, start, end = step.token_span
        ids = episode.segments[segment].token_ids.tolist()
        assert ids[:3] == [7, 7, 7] and ids[start:end] == [5, 6]
        assert episode.segments[segment].agent_mask[:start].sum() == 0


def test_the_error_policy_refuses_a_server_that_saw_other_ids() -> None:
    def policy(messages: Any, state: Any) -> tuple[AgentAction, Any]:
        return AgentAction(text="[50]", token_ids=[5], prompt_token_ids=[1, 2, 3]), state

    env = agentsgym.make(
        GUESS,
        tokenizer=TINY,
        env_config={"max_steps_per_episode": 2, "on_template_mismatch": "error"},
    )
    batch = env.run_trial([{"seed": 3}], FunctionAgent(policy))
    assert batch.failed and "conditioned on other prompt ids" in batch.failed[0].error


def test_an_action_with_no_tokens_keeps_its_reward_on_its_end_of_turn_token() -> None:
    tokenizer = agentsgym.load_tokenizer(TINY)
    eot = tokenizer.convert_tokens_to_ids("<|im_end|>")

    def policy(messages: Any, state: Any) -> tuple[AgentAction, Any]:
        # the right number as text, but no ids: a server that stripped its stop string
        number = "".join(ch for ch in messages[-1]["content"] if ch.isdigit())
        return AgentAction(text=number, token_ids=[], logprobs=[]), state

    env = CountdownEnv(tokenizer=tokenizer, env_config={"max_steps_per_episode": 2})
    episode = env.run_trial([{"start": 5}], FunctionAgent(policy)).all_episodes[0]
    assert episode.ok, episode.error
    rewards = episode.per_token_rewards
    assert [s.num_agent_tokens for s in episode.steps] == [1, 1]
    for step in episode.steps:
        _, start, end = step.token_span
        assert episode.full_token_ids[start:end] == [eot]
        assert episode.agent_token_mask[start:end] == [1]
        assert sum(rewards[start:end]) == pytest.approx(step.reward)
    assert sum(rewards) == pytest.approx(episode.final_reward) and episode.final_reward == 1.0


@pytest.mark.parametrize("token_in", [True, False])
def test_a_reply_cut_before_its_first_token_trains_no_token(token_in: bool) -> None:
    tokenizer = agentsgym.load_tokenizer(TINY)
    eot = tokenizer.convert_tokens_to_ids("<|im_end|>")

    def policy(messages: Any, state: Any) -> tuple[AgentAction, Any]:
        if token_in:  # the server answered no ids, cut at its length limit
            return AgentAction(text="", token_ids=[], logprobs=[], truncated=True), state
        return AgentAction(text="", truncated=True), state

    env = CountdownEnv(tokenizer=tokenizer, env_config={"max_steps_per_episode": 2})
    episode = env.run_trial([{"start": 5}], FunctionAgent(policy)).all_episodes[0]
    assert episode.ok, episode.error
    assert [s.num_agent_tokens for s in episode.steps] == [0, 0]
    assert sum(episode.agent_token_mask) == 0 and episode.full_token_ids.count(eot) >= 4
    segment = episode.segments[0]
    assert segment.logprobs is None or len(segment.logprobs) == len(segment.token_ids)
