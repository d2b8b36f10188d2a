"""A session's calls become one episode: segments continue where prompts extend them."""

from __future__ import annotations

import threading

import openai

import agentsgym
from agentsgym_gateway.episodes import episode_from_calls
from gateway_fixtures import MODEL, TOKENIZER, gateway_over

SYSTEM = {"role": "system", "content": "You are terse."}


def _chat() -> agentsgym.runtime.ChatTokenizer:
    return agentsgym.runtime.ChatTokenizer(agentsgym.load_tokenizer(TOKENIZER))


def _play(client: openai.OpenAI, *, keep_history: bool = True, turns: int = 3) -> None:
    """A program's loop: ask, read the answer, ask again (or drop its history)."""
    messages = [SYSTEM, {"role": "user", "content": "Count with me."}]
    for turn in range(turns):
        answer = client.chat.completions.create(model=MODEL, messages=messages)
        reply = {"role": "assistant", "content": answer.choices[0].message.content}
        follow = {"role": "user", "content": f"Next, {turn}."}
        messages = [*messages, reply, follow] if keep_history else [SYSTEM, follow]


def _episode(calls: list, **options: object) -> agentsgym.Episode:
    return episode_from_calls(
        calls, session_id="s", env_id="test/Program-v0", task_data={"q": 1}, **options
    )


def _session_calls(program, **gateway_options: object) -> list:
    with gateway_over(["one", "two", "three"], **gateway_options) as (gateway, _):
        session = gateway.open_session()
        program(openai.OpenAI(base_url=session.base_url, api_key=session.api_key))
        return gateway.close_session(session)


def test_a_program_that_keeps_its_history_is_one_segment() -> None:
    calls = _session_calls(_play)
    episode = _episode(calls, reward=1.0)
    assert len(episode.segments) == 1 and episode.num_turns == 3
    assert episode.metrics["sampled_token_share"] == 1.0
    assert episode.metrics["new_segments"] == 0
    segment = episode.segments[0]
    # the stream is the last prompt the backend conditioned on, then its completion
    last = calls[-1]
    assert segment.token_ids.tolist() == last.prompt_token_ids + last.completion_token_ids
    generated = sum(len(c.completion_token_ids) for c in calls)
    assert segment.num_agent_tokens == generated
    for call, step in zip(calls, episode.steps):
        _, start, end = step.token_span
        assert segment.token_ids[start:end].tolist() == call.completion_token_ids
        assert step.token_source == "server"
    assert abs(float(episode.segment_rewards[0].sum()) - 1.0) < 1e-5
    assert episode.steps[-1].reward == 1.0
    assert episode.has_logprobs


def test_a_program_that_drops_its_history_starts_new_segments_and_trains_nothing_twice() -> None:
    calls = _session_calls(lambda client: _play(client, keep_history=False))
    episode = _episode(calls, reward=0.5)
    assert len(episode.segments) == 3
    assert [s.info.get("new_segment", False) for s in episode.steps] == [False, True, True]
    generated = sum(len(c.completion_token_ids) for c in calls)
    assert episode.num_agent_tokens == generated  # each sampled token is trained once
    for call, step in zip(calls, episode.steps):
        index, start, _ = step.token_span
        segment = episode.segments[index]
        assert segment.token_ids[:start].tolist() == call.prompt_token_ids
        assert segment.agent_mask[:start].sum() == 0


def test_parallel_calls_from_one_prompt_each_get_their_own_segment() -> None:
    def program(client: openai.OpenAI) -> None:
        messages = [SYSTEM, {"role": "user", "content": "Two sub-agents, same prompt."}]
        threads = [
            threading.Thread(
                target=lambda: client.chat.completions.create(model=MODEL, messages=messages)
            )
            for _ in range(2)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    calls = _session_calls(program)
    episode = _episode(calls)
    assert len(calls) == 2 and len(episode.segments) == 2
    assert episode.num_agent_tokens == sum(len(c.completion_token_ids) for c in calls)


def test_text_only_calls_are_retokenized_with_the_env_template() -> None:
    calls = _session_calls(_play, vllm=False)
    chat = _chat()
    episode = _episode(calls, reward=1.0, chat=chat)
    assert [s.token_source for s in episode.steps] == ["retokenized"] * 3
    assert episode.metrics["sampled_token_share"] == 0.0
    assert not episode.has_logprobs
    # the retokenized stream is the template's rendering of the whole conversation, to
    # the text after the final reply (ChatML's newline: context, as a chat stream ends)
    last = calls[-1]
    conversation = [*last.messages, {"role": "assistant", "content": last.text}]
    expected = chat.encode_prompt(conversation, add_generation_prompt=False)
    segment = episode.segments[-1]
    assert segment.token_ids.tolist() == expected
    assert segment.agent_mask.tolist()[-1] == 0
    assert chat.tokenizer.decode([expected[-1]]) == "\n"


def test_retokenized_calls_without_a_tokenizer_fail_the_episode_with_what_to_do() -> None:
    calls = _session_calls(_play, vllm=False)
    episode = _episode(calls, reward=1.0)
    assert episode.error is not None and "tokenizer" in episode.error


def test_the_episode_pads_into_a_group_like_any_env() -> None:
    calls = _session_calls(lambda client: _play(client, keep_history=False))
    episode = _episode(calls, reward=1.0)
    group = agentsgym.TrajectoryGroup(
        task_index=0,
        task_data={"q": 1},
        env_id="test/Program-v0",
        trials=[[episode]],
        pad_token_id=0,
        tokenized=True,
    )
    batch = agentsgym.TrajectoryBatch([group])
    assert batch is not None
    record = episode.to_record()
    assert record["num_segments"] == 3 and record["step_token_sources"] == ["server"] * 3


def test_a_broken_token_invariant_is_the_episodes_error_never_raised() -> None:
    from agentsgym_gateway.records import CallRecord

    # a call that sampled nothing cannot carry the reward: Episode.check says so
    empty = CallRecord(index=0, endpoint="chat", prompt_token_ids=[1, 2], completion_token_ids=[])
    episode = _episode([empty], reward=1.0)
    assert episode.error is not None and "reward" in episode.error
