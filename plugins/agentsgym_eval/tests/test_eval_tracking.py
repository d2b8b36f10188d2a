"""``agentsgym eval --report-to trackio|wandb``: the summary, offline, read back from the
files the libraries wrote (each run a process of its own in the test's folder)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest

import tracker_files as files

GUESS = "agentsgym/GuessTheNumber-v0"
# Two guesses are too few for bisection on [1, 4]: some samples fail, some succeed.
ARGS = [
    "eval",
    GUESS,
    "-k",
    "2",
    "--num-tasks",
    "6",
    "--env-config",
    "max_steps_per_episode=2",
    "--env-config",
    "high=4",
    "--out",
    "results.jsonl",
    "--project",
    "evals",
    "--run-name",
    "guess-eval",
    "--log-samples",
    "5",
]


def evaluate(folder: Path, report_to: str) -> dict[str, Any]:
    """Run the eval reporting to ``report_to``; its summary file."""
    result = files.run_agentsgym(*ARGS, "--report-to", report_to, folder=folder)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"summary logged to {report_to}: run guess-eval of project evals" in result.stdout
    return json.loads((folder / "results.summary.json").read_text())


def assert_summary_logged(entry: dict[str, Any], summary: dict[str, Any]) -> None:
    def numbers(mapping: dict[str, Any], prefix: str) -> dict[str, float]:
        flat: dict[str, float] = {}
        for key, value in mapping.items():
            if isinstance(value, dict):
                flat.update(numbers(value, f"{prefix}{key}/"))
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                flat[f"{prefix}{key}"] = value
        return flat

    expected = numbers(summary, "eval/")
    assert {"eval/accuracy", "eval/pass_at_k/1", "eval/pass_at_k/2", "eval/best_at_k"} <= set(
        expected
    )
    assert 0 < summary["accuracy"] < 1  # a summary with something to tell
    for key, value in expected.items():
        assert math.isfinite(value) and entry[key] == pytest.approx(value), key


def assert_samples(folder: Path, rows: list[dict[str, Any]]) -> None:
    """The first 5 samples of the results file, their text and reward."""
    results = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    results.sort(key=lambda r: (r["task_index"], r["rollout_index"]))
    assert len(rows) == 5
    for row, sample in zip(rows, results):
        assert (row["task_index"], row["rollout_index"]) == (
            sample["task_index"],
            sample["rollout_index"],
        )
        assert row["reward"] == sample["final_reward"] and row["turns"] == sample["num_turns"]
        assert row["text"].startswith("user: I am thinking of an integer between 1 and 4")


@pytest.mark.skipif(importlib.util.find_spec("trackio") is None, reason="trackio not installed")
def test_eval_logs_its_summary_to_trackio(tmp_path: Path) -> None:
    summary = evaluate(tmp_path, "trackio")
    (entry,) = files.trackio_entries(tmp_path, "evals")
    assert entry["_run"] == "guess-eval" and entry["_step"] == 0
    assert_summary_logged(entry, summary)
    assert_samples(tmp_path, files.trackio_table(entry["eval/samples"]))
    config = files.trackio_config(tmp_path, "evals")
    assert config["env_id"] == GUESS and config["num_rollouts"] == 2


@pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="wandb not installed")
def test_eval_logs_its_summary_to_wandb_offline(tmp_path: Path) -> None:
    summary = evaluate(tmp_path, "wandb")
    run = files.wandb_run_folder(tmp_path)
    project, name, config = files.wandb_run(run)
    assert (project, name) == ("evals", "guess-eval") and config["env_id"] == GUESS
    (entry,) = files.wandb_history(run)
    assert_summary_logged(entry, summary)
    assert_samples(tmp_path, files.wandb_table(run, entry, "eval/samples"))
    # W&B wrote under WANDB_DIR and its other folders only, nothing in the working folder
    written = {p.name for p in tmp_path.iterdir() if not p.name.startswith("results.")}
    assert written <= {"wandb-dir", "wandb-config", "wandb-cache", "wandb-data"}
