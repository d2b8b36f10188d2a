"""dataset-sink writes the padded batches as a parquet datasets.Dataset; the registry."""

from __future__ import annotations

from typing import Any

import datasets
import pytest

import agentsgym
from agentsgym.trainers import RolloutSource, TrainerAdapter
from agentsgym_trl import BatchTrainer, DatasetSink

TINY = "agentsgym/tiny-chatml"
GUESS = "agentsgym/GuessTheNumber-v0"


@pytest.fixture
def source() -> RolloutSource:
    env = agentsgym.make(GUESS, tokenizer=TINY)
    return RolloutSource(
        env.get_train_dataset(size=6), tokenizer=TINY, num_rollouts=2, tasks_per_step=2
    )


def test_the_sink_writes_every_padded_row_of_every_batch(
    source: RolloutSource, tmp_path: Any
) -> None:
    batches = []

    class Keeping(DatasetSink):
        def consume(self, batch: Any) -> dict[str, float]:
            batches.append(batch)
            return super().consume(batch)

    sink = Keeping(tmp_path / "out")
    result = sink.train(source, max_steps=2, agent=agentsgym.make_agent("agentsgym/bisect"))
    path = tmp_path / "out" / "rollouts.parquet"
    assert result.artifacts["dataset"] == str(path) and result.num_steps == 2
    data = datasets.Dataset.from_parquet(str(path))
    assert len(data) == 8 == sum(len(b) for b in batches)
    assert sorted(set(data["group_index"])) == [0, 1, 2, 3]  # unique across steps
    assert data["step"] == [1, 1, 1, 1, 2, 2, 2, 2]
    expected = [
        (
            b.padded_full_token_ids,
            b.padded_agent_token_mask,
            b.padded_per_token_rewards,
            b.padded_full_attention_mask,
            b.final_rewards,
        )
        for b in batches
    ]
    ids = [x for e in expected for x in e[0]]
    assert data["full_token_ids"] == ids
    assert data["agent_token_mask"] == [x for e in expected for x in e[1]]
    assert data["per_token_rewards"] == [x for e in expected for x in e[2]]
    assert data["full_attention_mask"] == [x for e in expected for x in e[3]]
    assert data["final_reward"] == [x for e in expected for x in e[4]]
    for group in set(data["group_index"]):
        widths = {len(r["full_token_ids"]) for r in data if r["group_index"] == group}
        assert len(widths) == 1  # padded within the group, stackable as is
    # a text agent: the runner tokenized its replies
    assert all(r["token_sources"] == ["retokenized"] for r in data)
    assert all(isinstance(r["task_data"], dict) and "seed" in r["task_data"] for r in data)


def test_unpadded_mode_writes_the_batch_records(source: RolloutSource, tmp_path: Any) -> None:
    sink = agentsgym.runtime.make_trainer("dataset-sink", output_dir=str(tmp_path), unpadded=True)
    sink.train(source, max_steps=1, agent=agentsgym.make_agent("agentsgym/bisect"))
    data = datasets.Dataset.from_parquet(str(tmp_path / "rollouts.parquet"))
    assert len(data) == 4
    assert all(len(r["full_token_ids"]) == r["num_tokens"] for r in data)


def test_a_sink_needs_an_agent(source: RolloutSource, tmp_path: Any) -> None:
    with pytest.raises(ValueError, match="needs an agent"):
        DatasetSink(tmp_path).train(source, max_steps=1)


def test_every_shipped_trainer_is_registered_and_listed() -> None:
    from agentsgym.registry import get_registry

    trainers = get_registry().trainers
    assert {"trl-grpo", "per-token-grpo", "dataset-sink"} <= set(trainers)
    assert all(trainers[n].distribution == "agentsgym-trl" for n in ("trl-grpo", "dataset-sink"))
    agents = get_registry().agents
    assert {"transformers", "openai"} <= set(agents)
    sink = agentsgym.runtime.make_trainer("dataset-sink")
    assert isinstance(sink, TrainerAdapter) and isinstance(sink, BatchTrainer)
    with pytest.raises(agentsgym.errors.UnknownTrainerError, match="Did you mean: trl-grpo"):
        agentsgym.runtime.make_trainer("trl-grp")


def test_rollout_source_cycles_tasks_and_reuses_env_instances(tmp_path: Any) -> None:
    env = agentsgym.make(GUESS, tokenizer=TINY)
    source = RolloutSource(env.get_train_dataset(size=3), tokenizer=TINY, tasks_per_step=2, seed=0)
    seen = [row.task_data["seed"] for _ in range(3) for row in source.next_rows()]
    assert sorted(seen[:3]) == [0, 2, 4] and sorted(seen[3:6]) == [
        0,
        2,
        4,
    ]  # every task once per pass
    agent = agentsgym.make_agent("agentsgym/bisect")
    first = source.play(source.rows[:1], agent)
    second = source.play(source.rows[1:2], agent)
    assert len(source._envs) == 1
    assert [g.task_data for g in first.groups + second.groups] == [
        r.task_data for r in source.rows[:2]
    ]
