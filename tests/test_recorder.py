"""EpisodeRecorder, the one record of an episode under every producer: here the
producer that has only a model server's calls (a gateway), whose calls are placed into
segments by their prompt ids, each step carrying what its action carried."""

from __future__ import annotations

import pytest

from agentsgym import AgentAction
from agentsgym.errors import EpisodeError
from agentsgym.runtime import EpisodeRecorder


def recorder() -> EpisodeRecorder:
    made = EpisodeRecorder("s", "test/Calls-v0", {"q": 1}, {None: None})
    made.open_calls()
    return made


def call(prompt: list[int], completion: list[int], version: int | None = None) -> AgentAction:
    logprobs = [-0.5] * len(completion)
    return AgentAction(
        "reply",
        token_ids=completion,
        logprobs=logprobs,
        prompt_token_ids=prompt,
        policy_version=version,
    )


def test_calls_that_extend_a_segment_continue_it_and_others_start_one() -> None:
    record = recorder()
    said = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "reply"}]
    first = record.record_call(
        None, call([1, 2], [3, 4], 7), messages=said, token_source="server", info={}
    )
    # the next prompt is the first prompt, its completion and a new turn: same segment
    second = record.record_call(
        None, call([1, 2, 3, 4, 5], [6], 8), messages=said, token_source="server", info={}
    )
    # a prompt that drops the history extends no segment: a new one, all of it context
    third = record.record_call(
        None,
        call([9], [10, 11], 8),
        messages=said,
        token_source="server",
        info={},
        reward=1.0,
        done=True,
    )
    [episode] = record.close()
    assert (first.token_span, second.token_span, third.token_span) == (
        (0, 2, 4),
        (0, 5, 6),
        (1, 1, 3),
    )
    assert "new_segment" not in second.info and third.info["new_segment"] is True
    assert [s.token_ids.tolist() for s in episode.segments] == [[1, 2, 3, 4, 5, 6], [9, 10, 11]]
    assert [s.agent_mask.tolist() for s in episode.segments] == [[0, 0, 1, 1, 0, 1], [0, 1, 1]]
    # each step carries its action's policy version and token source, into the rows too
    assert episode.policy_versions == [7, 8, 8] and episode.min_policy_version == 7
    assert [s.token_source for s in episode.steps] == ["server"] * 3
    assert episode.has_logprobs and episode.final_reward == 1.0 and episode.ok
    assert episode.steps[-1].done and episode.metrics["turns"] == 3.0


def test_a_view_records_calls_only_once_opened_for_them() -> None:
    record = EpisodeRecorder("s", "test/Calls-v0", {}, {None: None})
    with pytest.raises(EpisodeError, match="open_calls"):
        record.record_call(None, call([1], [2]), messages=[], token_source="server", info={})
    record.open_calls()
    with pytest.raises(EpisodeError, match="records its tokens already"):
        record.open_calls()
    [episode] = record.close()  # no call: a tokenized episode with nothing in it
    assert episode.tokenized and episode.segments == [] and not episode.has_logprobs


def test_the_first_failure_holds_for_every_view() -> None:
    record = EpisodeRecorder("s", "test/Seats-v0", {}, {"a": None, "b": None})
    assert record.roles == ("a", "b")
    assert record.fail("the first") and not record.fail("a later one")
    record.truncate()
    episodes = record.close()
    assert [(e.role, e.error, e.truncated) for e in episodes] == [
        ("a", "the first", True),
        ("b", "the first", True),
    ]
    with pytest.raises(EpisodeError, match="no role 'c'; its roles: a, b"):
        record.view("c")
