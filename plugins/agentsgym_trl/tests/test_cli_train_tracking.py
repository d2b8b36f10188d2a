"""``agentsgym train --report-to trackio|wandb``, offline, read back from the files the
libraries wrote: every number of the step log under ``train/`` at its step, with the
values of ``train_log.jsonl``; tables of sample episodes; the run's configuration.

Each run is a process of its own (as a user runs it) in the test's folder, trackio's
database and W&B's offline files kept there (tracker_files.tracker_environment).
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")

import tracker_files as files
from agentsgym.testing import run_cli

needs_trackio = pytest.mark.skipif(
    importlib.util.find_spec("trackio") is None,
    reason="trackio is not installed (pip install trackio; agentsgym-trl[test] has it)",
)
needs_wandb = pytest.mark.skipif(
    importlib.util.find_spec("wandb") is None,
    reason="wandb is not installed (pip install wandb; agentsgym-trl[test] has it)",
)

GUESS = "agentsgym/GuessTheNumber-v0"
SMALL = [
    "--model",
    "tiny",
    "--env-config",
    "high=3",
    "--env-config",
    "max_steps_per_episode=2",
    "--num-tasks",
    "4",
    "--num-rollouts",
    "2",
    "--tasks-per-step",
    "2",
    "--max-new-tokens",
    "8",
    "--project",
    "guess",
    "--run-name",
    "tracked",
    "--log-samples-every",
    "2",
    "--log-samples",
    "3",
]
STEPS = 4


def train(folder: Path, trainer: str, report_to: str, *extra: str) -> list[dict[str, Any]]:
    """Train ``STEPS`` steps reporting to ``report_to``; the step log it wrote."""
    result = files.run_agentsgym(
        "train",
        GUESS,
        "--trainer",
        trainer,
        "--max-steps",
        str(STEPS),
        "--output-dir",
        "out",
        "--report-to",
        report_to,
        *SMALL,
        *extra,
        folder=folder,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # nothing but the run's output and the trackers' folders in the working directory
    allowed = {"out", "trackio", "wandb-dir", "wandb-config", "wandb-cache", "wandb-data"}
    assert {p.name for p in folder.iterdir()} <= allowed
    lines = (folder / "out" / "train_log.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def step_entries(entries: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The logged entries that hold a step's step log, by step (a library also logs
    entries of its own: TRL's timings, its last summary)."""
    return {int(e["train/global_step"]): e for e in entries if "train/mean_reward" in e}


def assert_step_log_logged(entries: dict[int, dict[str, Any]], log: list[dict[str, Any]]) -> None:
    assert sorted(entries) == list(range(1, STEPS + 1))
    for step in log:
        entry = entries[step["step"]]
        numbers = {
            k: v
            for k, v in step.items()
            if k != "step" and isinstance(v, (int, float)) and math.isfinite(v)
        }
        assert {"loss", "mean_reward", "num_tokens", "seconds", "groups"} <= set(numbers)
        for key, value in numbers.items():
            assert entry[f"train/{key}"] == pytest.approx(value, rel=1e-12), key
        tokens_per_second = step["num_tokens"] / step["seconds"]
        assert entry["train/tokens_per_second"] == pytest.approx(tokens_per_second)


def played_episodes(folder: Path) -> set[tuple[int, int, float, str]]:
    """(task, rollout, reward, text) of every episode training played."""
    episodes = set()
    for line in (folder / "out" / "played.jsonl").read_text().splitlines():
        row = json.loads(line)
        text = "\n\n".join(f"{m['role']}: {m['content']}" for m in row["messages"])
        episodes.add((row["task_index"], row["rollout_index"], row["final_reward"], text))
    return episodes


def assert_sample_tables(folder: Path, tables: dict[int, list[dict[str, Any]]]) -> None:
    """A table of 3 played episodes at steps 2 and 4 (--log-samples-every 2), none else."""
    assert sorted(tables) == [2, 4]
    played = played_episodes(folder)
    for rows in tables.values():
        assert len(rows) == 3
        for row in rows:
            assert row["text"].startswith("user: I am thinking of an integer between 1 and 3")
            key = (row["task_index"], row["rollout_index"], row["reward"], row["text"])
            assert key in played


def trackio_tables(steps: dict[int, dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    logged = {s: e for s, e in steps.items() if "train/samples" in e}
    return {s: files.trackio_table(e["train/samples"]) for s, e in logged.items()}


def wandb_tables(run: Path, steps: dict[int, dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    logged = {s: e for s, e in steps.items() if "train/samples/path" in e}
    return {s: files.wandb_table(run, e, "train/samples") for s, e in logged.items()}


@needs_trackio
def test_per_token_grpo_reports_its_step_log_and_samples_to_trackio(tmp_path: Path) -> None:
    # --async: the stream's staleness figures are step-log numbers like any other
    log = train(tmp_path, "per-token-grpo", "trackio", "--async", "--max-staleness", "1")
    entries = [e for e in files.trackio_entries(tmp_path, "guess") if e["_run"] == "tracked"]
    steps = step_entries(entries)
    assert_step_log_logged(steps, log)
    assert all(entry["_step"] == step for step, entry in steps.items())
    assert all("train/staleness_mean" in entry for entry in steps.values())
    assert_sample_tables(tmp_path, trackio_tables(steps))
    config = files.trackio_config(tmp_path, "guess")
    assert config["env_id"] == GUESS and config["trainer"] == "per-token-grpo"
    assert config["max_steps"] == STEPS


@needs_wandb
def test_per_token_grpo_reports_to_wandb_offline(tmp_path: Path) -> None:
    log = train(tmp_path, "per-token-grpo", "wandb")
    run = files.wandb_run_folder(tmp_path)
    project, name, config = files.wandb_run(run)
    assert (project, name) == ("guess", "tracked")
    assert config["env_id"] == GUESS and config["trainer"] == "per-token-grpo"
    history = files.wandb_history(run)
    steps = step_entries(history)
    assert_step_log_logged(steps, log)
    assert_sample_tables(tmp_path, wandb_tables(run, steps))


@needs_trackio
def test_trl_grpo_passes_the_tracker_to_trl_and_adds_its_step_log(tmp_path: Path) -> None:
    log = train(tmp_path, "trl-grpo", "trackio")
    entries = [e for e in files.trackio_entries(tmp_path, "guess") if e["_run"] == "tracked"]
    steps = step_entries(entries)
    assert_step_log_logged(steps, log)
    # TRL's own report is in the same entries: its reward and learning rate
    assert all({"train/reward", "train/learning_rate"} <= set(e) for e in steps.values())
    assert_sample_tables(tmp_path, trackio_tables(steps))
    config = files.trackio_config(tmp_path, "guess")
    # the run's arguments next to TRL's configuration, whose values are kept
    assert config["env_id"] == GUESS and config["trainer"] == "trl-grpo"
    assert config["report_to"] == ["trackio"] and config["learning_rate"] == 1e-6


@needs_wandb
def test_trl_grpo_reports_to_wandb_offline(tmp_path: Path) -> None:
    log = train(tmp_path, "trl-grpo", "wandb")
    run = files.wandb_run_folder(tmp_path)
    project, name, config = files.wandb_run(run)
    assert (project, name) == ("guess", "tracked") and config["trainer"] == "trl-grpo"
    steps = step_entries(files.wandb_history(run))
    assert_step_log_logged(steps, log)
    assert all("train/reward" in e for e in steps.values())
    assert_sample_tables(tmp_path, wandb_tables(run, steps))


@pytest.mark.parametrize("tracker", ["trackio", "wandb"])
def test_a_tracker_that_is_not_installed_is_one_line_before_any_model_loads(
    tracker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentsgym.cli import tracker_class
    from agentsgym.errors import TrackerError

    try:
        monkeypatch.setattr(tracker_class(tracker), "module", "not_installed_tracker")
    except TrackerError:
        pass  # not installed here: the command meets it as a user without it does
    out = tmp_path / "run"
    result = run_cli(
        "train",
        GUESS,
        "--trainer",
        "per-token-grpo",
        *SMALL,
        "--output-dir",
        str(out),
        "--report-to",
        tracker,
    )
    assert result.code == 2
    assert f"--report-to {tracker} needs" in result.stderr
    assert f"pip install {tracker}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


def test_an_unknown_tracker_is_refused_with_the_choices(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = run_cli("train", GUESS, *SMALL, "--output-dir", str(out), "--report-to", "tensorboard")
    assert result.code == 2 and "trackio, wandb, none" in result.stderr and not out.exists()
