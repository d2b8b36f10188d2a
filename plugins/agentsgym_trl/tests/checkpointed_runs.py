"""The small GuessTheNumber training run that the resume and async tests share: a tiny
model warm-started on numbers up to 3, a run that checkpoints after every step, and the
check that an --async K=0 run trains what the synchronous one trains."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentsgym_trl.tiny_model import save_tiny_model

GUESS = "agentsgym/GuessTheNumber-v0"

CHECKPOINTED_RUN = [
    "--env-config",
    "high=3",
    "--env-config",
    "max_steps_per_episode=2",
    "--num-tasks",
    "4",
    "--num-rollouts",
    "2",
    "--tasks-per-step",
    "1",
    "--max-new-tokens",
    "6",
    "--save-steps",
    "1",
]
"""``agentsgym train`` options of a run of one task per step, saved after every step."""


def warm_tiny_model(folder: Path) -> Path:
    """The tiny model, warm-started on GuessTheNumber up to 3, saved in ``folder``."""
    return save_tiny_model(folder, warm_start="guess-number", high=3)


def assert_k0_trains_what_sync_trains(train: Callable[..., Any], folder: Path) -> None:
    """``train(out, *args)`` synchronously and with ``--async --max-staleness 0``, one
    episode at a time (so the agent's batches, and so its samples, do not depend on
    which episode's request came first): both play the same tokens, in the same order,
    at the same versions, and log the same figures."""
    run = ["--max-steps", "3", "--max-concurrency", "1"]
    synchronous, streamed = folder / "sync", folder / "k0"
    assert train(synchronous, *run).code == 0
    result = train(streamed, *run, "--async", "--max-staleness", "0")
    assert result.code == 0, result.output

    def rows(out: Path) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (out / "played.jsonl").read_text().splitlines()]

    def log(out: Path) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]

    def played(out: Path) -> list[tuple[Any, ...]]:
        keys = ("step", "task_data", "full_token_ids", "step_policy_versions")
        return [tuple(row.get(key) for key in keys) for row in rows(out)]

    assert played(streamed) == played(synchronous)
    for ours, theirs in zip(log(streamed), log(synchronous), strict=True):
        assert ours["staleness_max"] == 0
        for key in ("loss", "grad_norm", "mean_reward", "advantage_std", "is_ratio_mean"):
            assert ours[key] == theirs[key], key
