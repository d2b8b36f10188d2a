"""Every agent turn records the policy version that generated it (issue 30)."""

from __future__ import annotations

from typing import Any

import datasets
import numpy as np

from agentsgym import AgentAction
from agentsgym.trajectory import records_to_dataset
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
