"""Seeded, disjoint train/eval splits of a word list, as task_data.

Each category (place, person, thing) is shuffled with the seed and its first
``eval_fraction`` held out, so both splits cover every category in proportion. The
same seed and fraction always give the same split, and a word is in exactly one
split. ``task_data`` is ``{"solution": word, "seed": n}``, where ``n`` numbers the
tasks of the split.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from agentsgym_twentyq.words import Level, Secret, level_of, word_list

if TYPE_CHECKING:
    import datasets

Split = Literal["train", "eval"]


def split_words(
    level: Level, *, seed: int = 0, eval_fraction: float = 0.2
) -> dict[Split, list[Secret]]:
    """The words of ``level`` in a train and an eval part."""
    if not 0.0 < eval_fraction < 1.0:
        raise ValueError(f"eval_fraction must be between 0 and 1 (exclusive), got {eval_fraction}")
    rng = random.Random(f"agentsgym-twentyq/{level}/{seed}")
    parts: dict[Split, list[Secret]] = {"train": [], "eval": []}
    words = word_list(level)
    for category in ("place", "person", "thing"):
        group = sorted((s for s in words if s.category == category), key=lambda s: s.word)
        rng.shuffle(group)
        held_out = max(1, math.floor(len(group) * eval_fraction))
        parts["eval"].extend(group[:held_out])
        parts["train"].extend(group[held_out:])
    for part in parts.values():
        rng.shuffle(part)
    return parts


def split_tasks(
    level: Level, split: Split, *, seed: int = 0, eval_fraction: float = 0.2
) -> list[dict[str, Any]]:
    """task_data of one split."""
    if split not in ("train", "eval"):
        raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
    words = split_words(level, seed=seed, eval_fraction=eval_fraction)[split]
    return [{"solution": secret.word, "seed": index} for index, secret in enumerate(words)]


class WordListTasks:
    """The tasks of a Twenty Questions env, a base class beside ``MultistepEnv``: the
    words of its list (``config.hardcore``) in seeded, disjoint train and eval splits."""

    config: Any
    make_dataset: Callable[[list[dict[str, Any]]], datasets.Dataset]

    @property
    def level(self) -> Level:
        return level_of(self.config.hardcore)

    def get_train_dataset(self, *, seed: int = 0, eval_fraction: float = 0.2) -> datasets.Dataset:
        """The words of this env's list not held out for evaluation, shuffled by ``seed``."""
        return self.make_dataset(
            split_tasks(self.level, "train", seed=seed, eval_fraction=eval_fraction)
        )

    def get_eval_dataset(self, *, seed: int = 0, eval_fraction: float = 0.2) -> datasets.Dataset:
        """The held-out ``eval_fraction`` of every category of this env's list."""
        return self.make_dataset(
            split_tasks(self.level, "eval", seed=seed, eval_fraction=eval_fraction)
        )
