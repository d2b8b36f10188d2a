"""``--async``: a step whose groups are all older than the bound. Both trainers count
what they discard in one unit (GRPO groups), mark its rows in ``played.jsonl``, train
nothing of it, and end the run saying what happened, not with a loss they never had."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from agentsgym.runtime import TrainResult
from agentsgym_trl import PerTokenGRPOTrainer, TRLGRPOAdapter
from agentsgym_trl.played_rollouts import RecordingSource
from agentsgym_trl.train_summary import print_summary
from checkpointed_runs import GUESS, warm_tiny_model
from trainer_agents import ThinkingAgent

pytestmark = pytest.mark.usefixtures("torch_single_thread")

TASKS_PER_STEP = 2
ROLLOUTS = 2


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: Any) -> Path:
    return warm_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


class FrozenAgent(ThinkingAgent):
    """A given agent whose server never takes new weights: every reply says version 0."""

    def get_action(self, *args: Any, **kwargs: Any) -> Any:
        action, state = super().get_action(*args, **kwargs)
        action.policy_version = 0
        return action, state


def trainer(name: str, model_dir: Path, out: Path) -> Any:
    if name == "trl-grpo":
        return TRLGRPOAdapter(str(model_dir), output_dir=out, max_new_tokens=6)
    return PerTokenGRPOTrainer(str(model_dir), output_dir=out, max_new_tokens=6)


@dataclass
class StaleRun:
    """A two-step run at K=0 with an agent stuck at version 0: step 1's groups are
    fresh, step 2's a version old, all of them discarded."""

    name: str
    result: TrainResult
    played: Path
    folder: Path

    def steps(self) -> list[dict[str, Any]]:
        return [s.to_dict() for s in self.result.steps]

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.played.read_text().splitlines()]


@pytest.fixture(scope="module", params=["per-token-grpo", "trl-grpo"])
def stale_run(request: Any, model_dir: Path, tmp_path_factory: Any) -> StaleRun:
    name = request.param
    folder = tmp_path_factory.mktemp(name)
    adapter = trainer(name, model_dir, folder / "out")
    rows = [
        {
            "env_class_path": GUESS,
            "env_config": {"high": 3, "max_steps_per_episode": 2},
            "task_data": {"seed": seed},
        }
        for seed in range(2 * TASKS_PER_STEP)
    ]
    played = folder / "played.jsonl"
    source = RecordingSource(
        rows,
        record_to=played,
        tokenizer=adapter.tokenizer,
        num_rollouts=ROLLOUTS,
        tasks_per_step=TASKS_PER_STEP,
    )
    result = adapter.train(
        source, max_steps=2, agent=FrozenAgent(adapter.tokenizer), max_staleness=0
    )
    return StaleRun(name, result, played, folder)


def test_both_trainers_count_discarded_groups_in_grpo_groups(stale_run: StaleRun) -> None:
    """trl-grpo plays each prompt entry as a group of its own; it counts GRPO groups
    (a task's rollouts), as per-token-grpo does."""
    first, second = stale_run.steps()
    assert first["groups"] == TASKS_PER_STEP and first["groups_discarded"] == 0
    assert second["groups_discarded"] == TASKS_PER_STEP and second["num_rollouts"] == 0


def test_the_rows_of_discarded_groups_say_so(stale_run: StaleRun) -> None:
    """A rows-only audit tells the rows trained from those discarded as too old."""
    records = stale_run.records()
    assert len(records) == 2 * TASKS_PER_STEP * ROLLOUTS
    discarded = [r for r in records if r["discarded"]]
    assert len(discarded) == TASKS_PER_STEP * ROLLOUTS
    assert all(max(r["step_policy_versions"]) == 0 for r in discarded)
    if stale_run.name == "per-token-grpo":  # rows taken per step say their step
        assert {r["step"] for r in discarded} == {2}
        assert not any(r["discarded"] for r in records if r["step"] == 1)
    groups = {r["group_index"] for r in records}
    assert groups == set(range(len(groups)))  # numbered as taken, none left out


def test_a_step_of_groups_all_too_old_trains_nothing_and_the_run_says_why(
    stale_run: StaleRun, capsys: Any
) -> None:
    """Not "the loss is not finite; lower --learning-rate" (exit 1): the step has no
    loss, and the summary says which steps trained nothing and why."""
    second = stale_run.steps()[1]
    if stale_run.name == "per-token-grpo":  # the update is skipped: no loss computed
        assert second["skipped"] == 1.0 and second.get("loss") is None
    else:  # TRL runs its step, on completions that are all masked
        assert second["trained_rows"] == 0 and second["loss"] == 0.0
    log = stale_run.folder / "train_log.jsonl"
    print_summary(stale_run.result, 1.0, log, played=stale_run.played, env_id=GUESS)
    said = " ".join(capsys.readouterr().out.split())
    assert "1 of 2 steps trained nothing (step 2)" in said
    assert "--max-staleness" in said and "not finite" not in said
