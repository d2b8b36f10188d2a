"""The experiment trackers of the CLI kit (agentsgym.cli.tracking, agentsgym.cli.trackers):
which numbers are logged, sample tables, the choice of a tracker and its errors, and
each tracker's run read back from the files its library wrote offline."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentsgym.cli import (
    SAMPLE_COLUMNS,
    Tracker,
    sample_rows,
    start_tracker,
    tracked_values,
    tracker_class,
)
from agentsgym.errors import TrackerError
from agentsgym.runtime import StepMetrics
from agentsgym.trajectory import Episode, TrajectoryBatch, TrajectoryGroup
from tracker_files import (
    tracker_environment,
    trackio_config,
    trackio_entries,
    trackio_table,
    wandb_history,
    wandb_run,
    wandb_run_folder,
    wandb_table,
)


def test_tracked_values_are_every_finite_number_flattened() -> None:
    metrics = {
        "loss": 0.5,
        "num_tokens": 12,
        "pass_at_k": {1: 0.25, 4: 0.75},
        "roles": {"x": {"accuracy": 1.0, "name": "x"}},
        "weight_sync_seconds": 0.125,  # a metric no list here names
        "complete": True,
        "env_id": "a/B-v0",
        "kl": None,
        "grad_norm": float("nan"),
        "ratio_max": float("inf"),
    }
    assert tracked_values(metrics, "train/") == {
        "train/loss": 0.5,
        "train/num_tokens": 12.0,
        "train/pass_at_k/1": 0.25,
        "train/pass_at_k/4": 0.75,
        "train/roles/x/accuracy": 1.0,
        "train/weight_sync_seconds": 0.125,
    }


def test_sample_rows_give_an_episodes_text_and_reward() -> None:
    episode = Episode(
        session_id="s",
        env_id="a/B-v0",
        task_data={},
        messages=[{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}],
        final_reward=1.0,
        task_index=3,
        rollout_index=1,
        role="solver",
    )
    failed = Episode(session_id="f", env_id="a/B-v0", task_data={}, error="ValueError: boom")
    rows = sample_rows([episode, failed])
    assert [dict(zip(SAMPLE_COLUMNS, row)) for row in rows] == [
        {
            "task_index": 3,
            "rollout_index": 1,
            "role": "solver",
            "reward": 1.0,
            "turns": 0,
            "error": "",
            "text": "user: 2+2?\n\nassistant: 4",
        },
        {
            "task_index": 0,
            "rollout_index": 0,
            "role": "",
            "reward": 0.0,
            "turns": 0,
            "error": "ValueError: boom",
            "text": "",
        },
    ]


def test_the_step_log_has_each_roles_mean_reward() -> None:
    def group(task: int, rewards: list[float], role: str | None) -> TrajectoryGroup:
        trials = [
            [Episode(session_id=f"{task}{role}{i}", env_id="a/B-v0", task_data={}, final_reward=r)]
            for i, r in enumerate(rewards)
        ]
        return TrajectoryGroup(task, {}, "a/B-v0", trials, None, False, role)

    groups = [group(0, [1.0, 0.0], "x"), group(1, [1.0, 1.0], "x"), group(0, [-1.0, 0.0], "o")]
    extra = StepMetrics.of_batch(TrajectoryBatch(groups), step=1).extra
    assert extra["reward/x"] == 0.75 and extra["reward/o"] == -0.5
    without_roles = StepMetrics.of_batch(TrajectoryBatch([group(0, [1.0], None)]), step=1)
    assert not any(key.startswith("reward/") for key in without_roles.extra)


def test_none_is_no_tracker_and_an_unknown_one_lists_the_choices() -> None:
    assert tracker_class("none") is None
    assert start_tracker("none", project="p", run_name=None, config={}) is None
    with pytest.raises(TrackerError, match="use one of trackio, wandb, none"):
        tracker_class("tensorboard")


@pytest.mark.parametrize("name", ["trackio", "wandb"])
def test_a_tracker_whose_library_is_missing_says_what_to_install(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentsgym.cli.trackers import TRACKERS

    monkeypatch.setattr(TRACKERS[name], "module", "library_that_is_not_installed")
    missing = f"needs the library_that_is_not_installed library, .*: pip install {name}"
    with pytest.raises(TrackerError, match=missing):
        tracker_class(name)


def test_a_run_that_cannot_start_is_a_tracker_error_with_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentsgym.cli.trackers import TRACKERS

    def refuse(cls: type[Tracker], **options: Any) -> Tracker:
        raise RuntimeError("api_key not configured (no-tty)")

    wandb = TRACKERS["wandb"]
    monkeypatch.setattr(wandb, "installed", classmethod(lambda cls: True))
    monkeypatch.setattr(wandb, "start", classmethod(refuse))
    with pytest.raises(TrackerError) as raised:
        start_tracker("wandb", project="p", run_name=None, config={})
    message = str(raised.value)
    assert "could not start a run in project 'p'" in message and "no-tty" in message
    assert "WANDB_MODE=offline" in message


# Each tracker in a process of its own (trackio reads TRACKIO_DIR once, on import).
LOG_A_RUN = """
import sys
from agentsgym.cli import SAMPLE_COLUMNS, start_tracker

tracker = start_tracker(sys.argv[1], project="tests", run_name="one", config={"lr": 0.5})
tracker.log({"train/loss": 1.5, "train/global_step": 1}, step=1)
table = tracker.table(SAMPLE_COLUMNS, [[0, 1, "", 0.25, 2, "", "user: hi"]])
tracker.log({"train/loss": 0.75, "train/samples": table, "train/global_step": 2}, step=2)
tracker.finish()
tracker.finish()  # a second finish does nothing
print("logged to", tracker.run_name)
"""


def log_a_run(name: str, folder: Path) -> None:
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not installed (pip install {name})")
    env = {**os.environ, **tracker_environment(folder)}
    result = subprocess.run(
        [sys.executable, "-c", LOG_A_RUN, name],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("logged to one")  # trackio's own lines: on stderr


def test_a_trackio_run_is_read_back_from_its_database(tmp_path: Path) -> None:
    log_a_run("trackio", tmp_path)
    entries = trackio_entries(tmp_path, "tests")
    assert [(e["_step"], e["train/loss"]) for e in entries] == [(1, 1.5), (2, 0.75)]
    rows = trackio_table(entries[1]["train/samples"])
    assert rows == [dict(zip(SAMPLE_COLUMNS, [0, 1, "", 0.25, 2, "", "user: hi"]))]
    assert trackio_config(tmp_path, "tests")["lr"] == 0.5


def test_a_wandb_offline_run_is_read_back_from_its_files(tmp_path: Path) -> None:
    log_a_run("wandb", tmp_path)
    run = wandb_run_folder(tmp_path)
    project, name, config = wandb_run(run)
    assert (project, name, config["lr"]) == ("tests", "one", 0.5)
    history = wandb_history(run)
    assert [(e["_step"], e["train/loss"]) for e in history] == [(1, 1.5), (2, 0.75)]
    rows = wandb_table(run, history[1], "train/samples")
    assert rows == [dict(zip(SAMPLE_COLUMNS, [0, 1, "", 0.25, 2, "", "user: hi"]))]
