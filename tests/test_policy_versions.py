"""Every agent turn records the policy version that generated it (issue 30)."""

from __future__ import annotations

from typing import Any

import datasets
import numpy as np
import pytest

import agentsgym
from agentsgym import AgentAction
from agentsgym.agents.openai_wire import span_versions
from agentsgym.trajectory import StepRecord, records_to_dataset
from envs_for_tests import CountingAgent, countdown

TINY = "agentsgym/tiny-chatml"


class VersionedAgent(CountingAgent):
    """Counts down correctly; reports a version that the test moves between turns."""

    def __init__(self, versions: list[int | None]) -> None:
        super().__init__()
        self.versions = versions

    def get_action(self, messages: list[dict[str, str]], agent_state: Any) -> Any:
        text, state = super().get_action(messages, agent_state)
        return AgentAction(text, policy_version=self.versions[self.calls - 1]), state


def test_an_episode_straddling_a_weight_update_keeps_each_turns_version(tmp_path) -> None:
    env = countdown(TINY)
    batch = env.run_trial([{"start": 2}], VersionedAgent([3, 4]))
    [episode] = batch.episodes
    assert [s.policy_version for s in episode.steps] == [3, 4]
    assert (episode.min_policy_version, episode.max_policy_version) == (3, 4)
    arrays = batch.padded_arrays()
    versions, agent = arrays["policy_versions"][0], arrays["agent_token_mask"][0].astype(bool)
    assert set(versions[~agent].tolist()) == {-1}
    spans = [s.token_span for s in episode.steps]
    for (_, start, end), version in zip(spans, (3, 4)):
        assert set(versions[start:end].tolist()) == {version}
    [record] = batch.to_records()
    assert record["step_policy_versions"] == [3, 4]
    path = tmp_path / "r.parquet"
    records_to_dataset(batch.to_records()).to_parquet(str(path))
    [loaded] = datasets.Dataset.from_parquet(str(path)).to_list()
    assert loaded["step_policy_versions"] == [3, 4]
    assert (loaded["min_policy_version"], loaded["max_policy_version"]) == (3, 4)


def test_an_agent_that_cannot_say_its_version_records_none() -> None:
    env = countdown(TINY)
    batch = env.run_trial([{"start": 2}], CountingAgent())
    [episode] = batch.episodes
    assert episode.policy_versions == [None, None]
    assert episode.min_policy_version is None and episode.max_policy_version is None
    assert np.all(batch.padded_arrays()["policy_versions"] == -1)


def test_a_partly_versioned_episode_has_no_known_oldest_version() -> None:
    env = countdown(TINY)
    [episode] = env.run_trial([{"start": 2}], VersionedAgent([None, 5])).episodes
    assert episode.min_policy_version is None and episode.max_policy_version == 5


class TokenVersionedAgent(CountingAgent):
    """Counts down correctly, token-in: its reply's ids are the tokenizer's encoding of
    the number and the end-of-turn token, each with the version the test gives."""

    wants_prompt_token_ids = True

    def __init__(self, tokenizer: Any, versions: list[list[int] | None]) -> None:
        super().__init__()
        self.chat = agentsgym.runtime.ChatTokenizer(agentsgym.load_tokenizer(tokenizer))
        self.versions = versions

    def get_action(
        self, messages: list[dict[str, str]], agent_state: Any, prompt_token_ids: Any = None
    ) -> Any:
        text, state = super().get_action(messages, agent_state)
        ids = self.chat.encode_model_text(text) + list(self.chat.eot_ids)
        versions = self.versions[self.calls - 1]
        if versions is not None:
            versions = (versions * len(ids))[: len(ids)] if len(versions) == 1 else versions
        return AgentAction(text, ids, policy_versions=versions), state


def test_a_reply_sampled_across_a_weight_update_keeps_each_tokens_version(tmp_path) -> None:
    """A reply whose first tokens came from version 3 and the rest from 4 (an engine
    updated in place while it generated) carries both, token by token, into the step,
    the padded batch and the rows; the step's own version is the oldest."""
    env = countdown(TINY)
    probe = TokenVersionedAgent(TINY, [])
    first = len(probe.chat.encode_model_text("2")) + len(probe.chat.eot_ids)
    split = [3] + [4] * (first - 1)
    batch = env.run_trial([{"start": 2}], TokenVersionedAgent(TINY, [split, [4]]))
    [episode] = batch.episodes
    assert [s.token_source for s in episode.steps] == ["sampled", "sampled"]
    assert episode.steps[0].policy_versions == split
    assert episode.steps[0].policy_version == 3
    assert (episode.min_policy_version, episode.max_policy_version) == (3, 4)
    arrays = batch.padded_arrays()
    versions, agent = arrays["policy_versions"][0], arrays["agent_token_mask"][0].astype(bool)
    assert set(versions[~agent].tolist()) <= {-1}
    _, start, end = episode.steps[0].token_span
    assert versions[start:end].tolist() == split
    [record] = batch.to_records()
    assert record["per_token_policy_versions"] == versions[: len(record["full_token_ids"])].tolist()
    path = tmp_path / "r.parquet"
    batch.to_dataset().to_parquet(str(path))
    [loaded] = datasets.Dataset.from_parquet(str(path)).to_list()
    assert loaded["per_token_policy_versions"] == record["per_token_policy_versions"]


def test_per_token_versions_that_do_not_pair_with_the_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="policy_versions"):
        AgentAction("hi", [1, 2], policy_versions=[0])
    with pytest.raises(ValueError, match="policy_versions"):
        AgentAction("hi", policy_versions=[0])
    assert AgentAction("hi", [1, 2], policy_versions=[5, 2]).policy_version == 2


def test_a_step_keeps_per_token_versions_only_for_the_ids_that_landed() -> None:
    """An empty reply lands as the end-of-turn token the template adds: no sampled id of
    the reply is in the stream, so it has no per-token versions, nor any version."""
    step = StepRecord("", 0.0, False, token_span=(0, 5, 6), policy_versions=[])
    assert step.policy_versions is None and step.token_versions() is None
    step = StepRecord("x", 0.0, False, token_span=(0, 5, 7), policy_version=2)
    assert step.token_versions() == [2, 2]


@pytest.mark.parametrize(
    ("spans", "count", "versions"),
    [
        (
            [{"version": "0", "start": 0, "end": 2}, {"version": "1", "start": 2, "end": 3}],
            3,
            [0, 0, 1],
        ),
        ([{"version": "7", "start": 0, "end": 0}], 0, []),
        ([{"version": "default", "start": 0, "end": 2}], 2, None),  # never labelled
        ([{"version": "1", "start": 0, "end": 1}], 2, None),  # a token without a span
        ([{"version": "1", "start": 0, "end": 3}], 2, None),  # beyond the tokens
        ([{"start": 0, "end": 1}], 1, None),
        (None, 1, None),
    ],
)
def test_vllm_weight_version_spans_become_one_version_per_token(
    spans: Any, count: int, versions: list[int] | None
) -> None:
    assert span_versions(spans, count) == versions
