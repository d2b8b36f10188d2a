"""Compact trajectories: arrays inside, the same padded and record views outside."""

from __future__ import annotations

from typing import Any

import datasets
import numpy as np
import pytest

from agentsgym.errors import TokenFidelityError
from agentsgym.trajectory import (
    Episode,
    StepRecord,
    TokenSegment,
    TrajectoryBatch,
    TrajectoryGroup,
    records_to_dataset,
    rewards_array,
)
from envs_for_tests import CountingAgent, countdown

TINY = "agentsgym/tiny-chatml"


def episode(
    ids: list[list[int]],
    masks: list[list[int]],
    rewards: list[list[float]],
    *,
    step_rewards: list[float],
    logprobs: list[list[float]] | None = None,
    session: str = "s",
) -> Episode:
    made = Episode(session_id=session, env_id="x/Y-v0", task_data={"k": 1}, tokenized=True)
    made.segments = [
        TokenSegment.from_lists(i, m, None if logprobs is None else logprobs[n])
        for n, (i, m) in enumerate(zip(ids, masks))
    ]
    made.segment_rewards = [rewards_array(r) for r in rewards]
    made.has_logprobs = logprobs is not None
    made.steps = [
        StepRecord(action="a", reward=r, done=False, num_agent_tokens=n)
        for r, n in zip(step_rewards, _runs(masks))
    ]
    made.final_reward = float(sum(step_rewards))
    return made


def _runs(masks: list[list[int]]) -> list[int]:
    """Agent tokens per action: the runs of 1s of each segment, in order."""
    runs: list[int] = []
    for mask in masks:
        previous = 0
        for value in mask:
            if value and not previous:
                runs.append(0)
            if value:
                runs[-1] += 1
            previous = value
    return runs


def test_segments_hold_compact_arrays_and_check_their_lengths() -> None:
    segment = TokenSegment.from_lists([5, 6, 7], [0, 1, 1], [0.0, -0.5, -1.0])
    assert segment.token_ids.dtype == np.int32 and segment.agent_mask.dtype == np.uint8
    assert segment.logprobs is not None and segment.logprobs.dtype == np.float32
    assert len(segment) == 3 and segment.num_agent_tokens == 2
    assert segment.nbytes == 3 * 4 + 3 + 2 * 4  # logprobs of the agent tokens only
    assert TokenSegment.from_lists([1], [1]).logprobs_or_zeros().tolist() == [0.0]
    with pytest.raises(TokenFidelityError, match="pair up"):
        TokenSegment.from_lists([1, 2], [1])

    class Builder:
        token_ids, agent_mask, logprobs = [1, 2], [0, 1], [0.0, -0.25]

    assert TokenSegment.from_builder(Builder(), has_logprobs=False).logprobs is None
    assert TokenSegment.from_builder(Builder(), has_logprobs=True).logprobs.tolist() == [0.0, -0.25]


def test_single_view_properties_are_plain_lists() -> None:
    made = episode([[1, 2, 3]], [[0, 1, 1]], [[0.0, 0.5, 0.5]], step_rewards=[1.0])
    assert made.full_token_ids == [1, 2, 3] and isinstance(made.full_token_ids[0], int)
    assert made.agent_token_mask == [0, 1, 1]
    assert made.per_token_rewards == [0.0, 0.5, 0.5]
    assert made.full_attention_mask == [1, 1, 1]
    assert made.sampled_logprobs is None
    made.check()


def test_the_check_catches_a_lost_reward_and_rewards_on_env_tokens() -> None:
    lost = episode([[1, 2, 3]], [[0, 1, 1]], [[0.0, 0.0, 0.0]], step_rewards=[1.0])
    with pytest.raises(TokenFidelityError, match="a step reward was lost"):
        lost.check()
    nowhere = episode([[1, 2]], [[0, 0]], [[0.0, 0.0]], step_rewards=[])
    nowhere.final_reward = 1.0
    with pytest.raises(TokenFidelityError, match="no agent token to carry it"):
        nowhere.check()
    on_env = episode([[1, 2, 3]], [[0, 1, 1]], [[0.5, 0.25, 0.25]], step_rewards=[1.0])
    with pytest.raises(TokenFidelityError, match="env token 0 carries reward"):
        on_env.check()
    # a reward split in float32 thirds still adds up within the tolerance
    thirds = episode([[1, 2, 3, 4]], [[0, 1, 1, 1]], [[0.0] + [1 / 3] * 3], step_rewards=[1.0])
    thirds.check()


def test_group_padding_uses_the_pad_id_and_zeros() -> None:
    short = episode([[1, 2]], [[0, 1]], [[0.0, 1.0]], step_rewards=[1.0], logprobs=[[0.0, -0.5]])
    long = episode(
        [[3, 4, 5, 6]], [[0, 1, 1, 0]], [[0.0, 0.5, 0.5, 0.0]], step_rewards=[1.0],
        logprobs=[[0.0, -1.0, -2.0, 0.0]], session="t",
    )
    group = TrajectoryGroup(0, {"k": 1}, "x/Y-v0", [[short], [long]], pad_token_id=99, tokenized=True)
    assert group.padded_length == 4
    assert group.padded_full_token_ids == [[1, 2, 99, 99], [3, 4, 5, 6]]
    assert group.padded_full_attention_mask == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert group.padded_agent_token_mask == [[0, 1, 0, 0], [0, 1, 1, 0]]
    assert group.padded_per_token_rewards == [[0.0, 1.0, 0.0, 0.0], [0.0, 0.5, 0.5, 0.0]]
    assert group.padded_sampled_logprobs == [[0.0, -0.5, 0.0, 0.0], [0.0, -1.0, -2.0, 0.0]]
    arrays = group.padded_arrays()
    assert arrays["input_ids"].dtype == np.int64 and arrays["per_token_rewards"].dtype == np.float32


def test_a_split_episode_gives_one_row_per_view_and_failed_ones_none() -> None:
    split = episode(
        [[1, 2], [1, 3, 4]], [[0, 1], [0, 0, 1]], [[0.0, 1.0], [0.0, 0.0, 1.0]],
        step_rewards=[1.0, 1.0],
    )
    failed = episode([[7]], [[0]], [[0.0]], step_rewards=[], session="f")
    failed.error = "RuntimeError: boom"
    group = TrajectoryGroup(0, {}, "x/Y-v0", [[split], [failed]], pad_token_id=0, tokenized=True)
    batch = TrajectoryBatch([group])
    assert len(batch) == 2 and batch.segment_indices == [0, 1] and batch.group_indices == [0, 0]
    assert batch.padded_full_token_ids == [[1, 2, 0], [1, 3, 4]]
    records = batch.to_records()
    assert [r["segment_index"] for r in records] == [0, 1, 0]
    assert records[1]["full_token_ids"] == [1, 3, 4] and records[1]["per_token_rewards"] == [0.0, 0.0, 1.0]
    assert records[2]["error"] == "RuntimeError: boom"
    assert batch.failed == [failed]
    # to_dataset builds its token columns from the arrays: the same rows as the records
    untokenized = Episode(session_id="u", env_id="x/Y-v0", task_data={}, error="E: no tokens")
    trials = [[split], [failed], [untokenized]]
    batch = TrajectoryBatch([TrajectoryGroup(0, {}, "x/Y-v0", trials, pad_token_id=0, tokenized=True)])
    dataset = batch.to_dataset()
    assert dataset.features == records_to_dataset(batch.to_records()).features
    assert dataset.to_list() == records_to_dataset(batch.to_records()).to_list()
    assert dataset[1]["full_token_ids"] == [1, 3, 4] and dataset[-1]["full_token_ids"] is None


def test_to_torch_equals_a_numpy_padding_of_the_same_fields() -> None:
    torch = pytest.importorskip("torch")
    env = countdown(TINY)
    batch = env.run_trial([{"start": 2}, {"start": 4}], CountingAgent(), num_rollouts=3)
    tensors = batch.to_torch()
    width = max(len(e.full_token_ids) for e in batch.episodes)
    pad = env.chat.pad_token_id
    expected_ids = [e.full_token_ids + [pad] * (width - len(e.full_token_ids)) for e in batch.episodes]
    assert tensors["input_ids"].dtype == torch.long
    assert tensors["input_ids"].tolist() == expected_ids
    assert tensors["agent_token_mask"].tolist() == [
        e.agent_token_mask + [0] * (width - len(e.agent_token_mask)) for e in batch.episodes
    ]
    for row, e in zip(tensors["per_token_rewards"].tolist(), batch.episodes):
        assert row == pytest.approx(e.per_token_rewards + [0.0] * (width - len(e.per_token_rewards)))
    assert tensors["group_indices"].tolist() == [0, 0, 0, 1, 1, 1]
    assert tensors["final_rewards"].tolist() == batch.final_rewards
    # the group-level lists agree with the batch-level arrays row for row
    assert [row[: len(g)] for row, g in zip(tensors["input_ids"].tolist(), batch.padded_full_token_ids)] == batch.padded_full_token_ids


def test_records_carry_step_rewards_and_survive_parquet(tmp_path: Any) -> None:
    from agentsgym import RewardTerm, hookimpl

    class Bonus:
        @hookimpl
        def reward_shaping(self, step):
            return RewardTerm("bonus", 0.25 * step)

    env = countdown(TINY)
    env.plugin_manager.register(Bonus())
    batch = env.run_trial([{"start": 2}], CountingAgent())
    [record] = batch.to_records()
    assert record["step_rewards"] == [0.5, 1.75]
    assert record["step_reward_terms"] == [{"bonus": 0.0}, {"bonus": 0.25}]
    assert record["step_token_sources"] == ["retokenized", "retokenized"]
    path = tmp_path / "r.parquet"
    records_to_dataset(batch.to_records()).to_parquet(str(path))
    [loaded] = datasets.Dataset.from_parquet(str(path)).to_list()
    assert loaded["full_token_ids"] == batch.episodes[0].full_token_ids
    assert loaded["step_rewards"] == [0.5, 1.75]
    assert loaded["step_reward_terms"] == [{"bonus": 0.0}, {"bonus": 0.25}]
    assert loaded["per_token_rewards"] == pytest.approx(batch.episodes[0].per_token_rewards)


def test_free_shots_keep_zeroed_reward_arrays() -> None:
    env = countdown(TINY, episodes_per_trial=2, free_shots=1)
    trial = env.run_trial([{"start": 1}], CountingAgent()).groups[0].trials[0]
    free, scored = trial
    assert free.free_shot and free.final_reward == 0.0
    assert all(r.dtype == np.float32 and not r.any() for r in free.segment_rewards)
    free.check()
    scored.check()
    assert sum(scored.per_token_rewards) == pytest.approx(1.5)


def test_logprobs_on_env_tokens_are_refused() -> None:
    with pytest.raises(TokenFidelityError, match="non-zero logprobs on env tokens"):
        TokenSegment.from_lists([1, 2], [0, 1], [-0.1, -0.2])
