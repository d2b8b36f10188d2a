"""The dataset row schema: mixed envs, parquet round trips, dispatch, bad rows."""

from __future__ import annotations

import datasets
import pytest

import agentsgym
from agentsgym import FunctionAgent
from agentsgym.errors import DatasetRowError, UntrustedClassPathError
from envs_for_tests import CountingAgent

COUNTDOWN = "envs_for_tests:CountdownEnv"


def mixed_rows() -> list[dict]:
    return [
        {"env_class_path": "agentsgym/GuessTheNumber-v0", "env_config": {"high": 8}, "task_data": {"target": 5}},
        {"env_class_path": COUNTDOWN, "env_config": {"start": 2}, "task_data": {}},
        {"env_class_path": "agentsgym/GuessTheNumber-v0", "env_config": {"high": 8}, "task_data": {"target": 3}},
        {"env_class_path": COUNTDOWN, "env_config": {"step_reward": 0.0}, "task_data": {"start": 1}},
    ]


def test_env_datasets_use_the_row_schema() -> None:
    env = agentsgym.make("agentsgym/GuessTheNumber-v0", env_config={"high": 50})
    train, evaluation = env.get_train_dataset(), env.get_eval_dataset()
    assert train.column_names == ["env_class_path", "env_config", "task_data"]
    row = train[0]
    assert row["env_class_path"] == "agentsgym/GuessTheNumber-v0" and row["task_data"] == {"seed": 0}
    # the full effective config, defaults included, so the row keeps its meaning when the
    # package's defaults change
    assert row["env_config"] == env.config.model_dump(mode="json")
    assert row["env_config"]["high"] == 50 and row["env_config"]["low"] == 1
    assert agentsgym.make(row["env_class_path"], env_config=row["env_config"]).config == env.config
    assert not {str(r) for r in train["task_data"]} & {str(r) for r in evaluation["task_data"]}


def test_mixed_rows_survive_parquet_and_dispatch_to_the_right_env(tmp_path) -> None:
    dataset = agentsgym.runtime.rows_to_dataset(mixed_rows())
    dataset.to_parquet(str(tmp_path / "rows.parquet"))
    loaded = datasets.Dataset.from_parquet(str(tmp_path / "rows.parquet"))
    assert loaded.to_list() == mixed_rows()

    def policy(messages, state):
        text = messages[0]["content"]
        if text.startswith("I am thinking"):  # GuessTheNumber: defer to bisection
            return agentsgym.make_agent("agentsgym/bisect").get_action(messages, state)
        return CountingAgent().get_action(messages, state)

    batch = agentsgym.runtime.run_dataset(
        loaded, FunctionAgent(policy), num_rollouts=2, allow_class_paths=True,
        tokenizer="agentsgym/tiny-chatml",
    )
    assert batch.group_indices == [0, 0, 1, 1, 2, 2, 3, 3]
    env_ids = [g.env_id for g in batch.groups]
    assert env_ids == ["agentsgym/GuessTheNumber-v0", COUNTDOWN] * 2
    assert [g.task_data for g in batch.groups] == [r["task_data"] for r in mixed_rows()]
    assert batch.final_rewards == [1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0]
    assert "between 1 and 8" in batch.groups[0].episodes[0].messages[0]["content"]


def test_dataset_class_paths_are_untrusted_by_default() -> None:
    with pytest.raises(UntrustedClassPathError):
        agentsgym.runtime.run_dataset(mixed_rows(), CountingAgent())


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"env_config": {}, "task_data": {}}, "env_class_path"),
        ({"env_class_path": "a/B-v0", "env_config": {}}, "task_data"),
        ({"env_class_path": "a/B-v0", "env_config": [], "task_data": {}}, "env_config"),
        ({"env_class_path": 3, "env_config": {}, "task_data": {}}, "env_class_path"),
    ],
)
def test_bad_rows_name_the_row_and_the_field(row: dict, field: str) -> None:
    rows = [mixed_rows()[0], row]
    with pytest.raises(DatasetRowError) as info:
        agentsgym.runtime.parse_rows(rows)
    assert "dataset row 1" in str(info.value) and field in str(info.value)


def test_bad_env_config_in_a_row_fails_before_any_episode() -> None:
    rows = [{"env_class_path": "agentsgym/GuessTheNumber-v0", "env_config": {"high": "x"}, "task_data": {}}]
    agent = CountingAgent()
    with pytest.raises(agentsgym.errors.EnvConfigError, match="high"):
        agentsgym.runtime.run_dataset(rows, agent)
    assert agent.calls == 0
