"""The small GuessTheNumber training run that the resume and async tests share: a tiny
model warm-started on numbers up to 3, and a run that checkpoints after every step."""

from __future__ import annotations

from pathlib import Path

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
