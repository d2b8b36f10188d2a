"""``agentsgym train --eval-steps N --eval-tasks K``: held-out scores at the eval steps,
in ``train_log.jsonl`` and in the tracker (trackio, offline), with both trainers; the
held-out tasks are the eval split's; bad values are one clear line.

A scripted player (bisection, through ``dataset-sink``) makes the scores exact; the
trainers' runs (a tiny model) check when and where they are logged.
"""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")

import test_cli_train_tracking as tracking
import tracker_files as files
from agentsgym import make
from agentsgym.testing import run_cli
from agentsgym_trl.train_eval import held_out_rows

needs_trackio = pytest.mark.skipif(
    importlib.util.find_spec("trackio") is None,
    reason="trackio is not installed (pip install trackio; agentsgym-trl[test] has it)",
)

GUESS = "agentsgym/GuessTheNumber-v0"
ONE_GUESS = ["--env-config", "high=3", "--env-config", "max_steps_per_episode=1"]
TRACKED = ["--report-to", "trackio", "--project", "evals", "--run-name", "tracked"]
EVAL_KEYS = {"eval/reward_mean", "eval/reward_std", "eval/success_rate", "eval/num_tasks"}


def train(folder: Path, *args: str) -> dict[int, dict[str, Any]]:
    """``agentsgym train GUESS *args`` in its own process; the step log, by step."""
    result = files.run_agentsgym("train", GUESS, "--output-dir", "out", *args, folder=folder)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = (folder / "out" / "train_log.jsonl").read_text().splitlines()
    return {entry["step"]: entry for entry in map(json.loads, lines)}


def tracked_evals(folder: Path, project: str) -> dict[int, dict[str, Any]]:
    """The entries trackio holds with held-out scores, by training step."""
    entries = [e for e in files.trackio_entries(folder, project) if e["_run"] == "tracked"]
    return {int(e["train/global_step"]): e for e in entries if "eval/reward_mean" in e}


def assert_tracked_as_logged(
    folder: Path, log: dict[int, dict[str, Any]], *, project: str = "evals"
) -> None:
    tracked = tracked_evals(folder, project)
    assert sorted(tracked) == sorted(
        step for step, entry in log.items() if "eval/num_tasks" in entry
    )
    for step, entry in tracked.items():
        for key in EVAL_KEYS:
            assert entry[key] == pytest.approx(log[step][key], rel=1e-12), key
        assert not any(name.startswith("train/eval") for name in entry)


def one_guess_success(num_tasks: int) -> float:
    """The success rate of bisection with one guess (2, of 1..3) on the first eval tasks
    of GuessTheNumber (odd seeds)."""
    targets = [random.Random(2 * i + 1).randint(1, 3) for i in range(num_tasks)]
    return targets.count(2) / num_tasks


@needs_trackio
def test_scores_of_a_scripted_player_at_every_eval_step_and_the_last(tmp_path: Path) -> None:
    log = train(
        tmp_path,
        "--trainer",
        "dataset-sink",
        "--agent",
        "agentsgym/bisect",
        "--max-steps",
        "5",
        "--num-tasks",
        "4",
        "--num-rollouts",
        "1",
        "--eval-steps",
        "2",
        "--eval-tasks",
        "12",
        *ONE_GUESS,
        *TRACKED,
    )
    assert sorted(log) == [1, 2, 3, 4, 5]
    evaluated = sorted(step for step, entry in log.items() if "eval/num_tasks" in entry)
    assert evaluated == [2, 4, 5]  # every 2 steps, and after the last
    expected = one_guess_success(12)
    assert 0 < expected < 1  # the tasks are not all alike: a wrong set would show
    for step in evaluated:
        entry = log[step]
        assert entry["eval/num_tasks"] == 12 and entry["eval/num_failed"] == 0
        assert entry["eval/success_rate"] == pytest.approx(expected)
        assert entry["eval/reward_mean"] == pytest.approx(expected)  # reward 1 iff found
    assert_tracked_as_logged(tmp_path, log)


@needs_trackio
@pytest.mark.parametrize("trainer", ["per-token-grpo", "trl-grpo"])
def test_a_trainer_logs_held_out_scores_at_its_eval_steps(trainer: str, tmp_path: Path) -> None:
    # the tracking tests' run (4 steps of a tiny model, project "guess", run "tracked")
    steps = tracking.train(tmp_path, trainer, "trackio", "--eval-steps", "3", "--eval-tasks", "3")
    log = {entry["step"]: entry for entry in steps}
    assert sorted(log) == [1, 2, 3, 4]
    assert not any(key.startswith("eval/") for step in (1, 2) for key in log[step])
    for step in (3, 4):  # every 3 steps, and after the last
        entry = log[step]
        assert EVAL_KEYS <= set(entry) and entry["eval/num_tasks"] == 3
        assert 0 <= entry["eval/success_rate"] <= 1
        # GuessTheNumber's reward is 1 when the number is found, else 0
        assert entry["eval/reward_mean"] == pytest.approx(entry["eval/success_rate"])
    assert_tracked_as_logged(tmp_path, log, project="guess")


def test_held_out_tasks_are_the_eval_splits_not_the_trained_ones() -> None:
    env = make(GUESS)
    trained = [row["task_data"]["seed"] for row in env.get_train_dataset().select(range(8))]
    held_out = held_out_rows(GUESS, env, split="train", num_trained=8, eval_tasks=5)
    assert [row["task_data"]["seed"] for row in held_out] == [1, 3, 5, 7, 9]
    assert not set(trained) & {row["task_data"]["seed"] for row in held_out}
    # training on the eval split: the tasks after the trained ones
    after = held_out_rows(GUESS, env, split="eval", num_trained=8, eval_tasks=2)
    assert [row["task_data"]["seed"] for row in after] == [17, 19]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--eval-steps", "-1"], "--eval-steps"),
        (["--eval-tasks", "-2", "--eval-steps", "1"], "--eval-tasks"),
        (["--eval-tasks", "3"], "give --eval-steps N too"),
        (["--eval-steps", "1", "--eval-tasks", "51"], "has 50 tasks; give --eval-tasks 50"),
        (
            ["--split", "eval", "--num-tasks", "48", "--eval-steps", "1", "--eval-tasks", "3"],
            "has 2 tasks after the 48 trained ones",
        ),
        (
            ["--split", "eval", "--num-tasks", "50", "--eval-steps", "1"],
            "none held out to evaluate on",
        ),
    ],
)
def test_bad_eval_options_are_one_clear_line_before_training(
    args: list[str], says: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    trainer = ["--trainer", "per-token-grpo", "--model", "tiny"]
    result = run_cli("train", GUESS, *trainer, "--output-dir", str(out), *args)
    assert result.code == 2, result.output
    assert says in " ".join(result.output.split())
    assert not (tmp_path / "out" / "train_log.jsonl").exists()
