"""Which generated problems make up each split of the embedded family.

Train and eval draw from different seed streams, and an eval problem whose text also
occurs among the train problems is skipped, so the two splits never share a problem.
"""

from __future__ import annotations

from typing import Literal

from agentsgym_classical.arithmetic.generator import WordProblem, generate_split

Role = Literal["train", "eval"]
DEFAULT_SIZES: dict[str, int] = {"train": 1000, "eval": 200}


def embedded_problems(
    role: Role,
    *,
    num_tasks: int | None = None,
    seed: int = 0,
    min_operations: int = 2,
    max_operations: int = 4,
) -> list[WordProblem]:
    """The generated problems of one split (``num_tasks`` of them, or the default size)."""
    shape = {"seed": seed, "min_operations": min_operations, "max_operations": max_operations}

    def split(name: Role, exclude: frozenset[str] = frozenset()) -> list[WordProblem]:
        count = num_tasks or DEFAULT_SIZES[name]
        return [p for _, p in generate_split(name, count, exclude=exclude, **shape)]

    if role == "train":
        return split("train")
    return split("eval", exclude=frozenset(p.text() for p in split("train")))
