"""QuickArithmetic (``classical/QuickArithmetic-v0``): one operation on small numbers,
answered with the number only.

"What is 7 + 5?" A task a small instruct model half knows: SmolLM2-135M-Instruct
answers about one in five correctly and briefly at temperature 0.7, and rambles past
a short length limit in half of its replies (which score nothing: a reply cut before
its answer is not graded). That makes it a format-following task a small model learns
on a CPU in minutes (``bench/bench_real_model_learning.py``). Every ``(a, op, b)`` of
the configured range is a problem; a seeded shuffle puts ``eval_fraction`` of them in
the eval split and the rest in the train split, so the splits never share a problem.
"""

from __future__ import annotations

import random
from typing import ClassVar

from pydantic import Field, model_validator

from agentsgym_classical.config import ClassicalConfig
from agentsgym_classical.env import ClassicalEnv, Role
from agentsgym_classical.problem import Problem

SYMBOLS = {"+": "+", "-": "-", "*": "×"}


class QuickArithmeticConfig(ClassicalConfig):
    """The operand range, the operations and the eval share of QuickArithmetic."""

    max_steps_per_episode: int = Field(
        default=1, ge=1, le=100, description="attempts per problem (1: answer at once)"
    )
    low: int = Field(default=1, ge=0, le=999, description="smallest operand")
    high: int = Field(default=9, ge=0, le=999, description="largest operand")
    operations: str = Field(
        default="+", pattern=r"^[+*-]{1,3}$", description="operations to draw from: + - *"
    )
    eval_fraction: float = Field(
        default=0.25, gt=0.0, lt=1.0, description="share of the problems held out for eval"
    )

    @model_validator(mode="after")
    def _range(self) -> QuickArithmeticConfig:
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) must not exceed high ({self.high})")
        return self


class QuickArithmeticEnv(ClassicalEnv):
    """One operation on two small numbers; the reply is the number."""

    config_class: ClassVar[type[ClassicalConfig]] = QuickArithmeticConfig
    config: QuickArithmeticConfig
    default_instruction = "Answer with the number only."

    def load_problems(self, role: Role) -> list[Problem]:
        config = self.config
        operands = range(config.low, config.high + 1)
        triples = [
            (a, op, b)
            for op in dict.fromkeys(config.operations)
            for a in operands
            for b in operands
        ]
        random.Random(config.seed).shuffle(triples)
        held_out = max(1, round(len(triples) * config.eval_fraction))
        chosen = triples[:held_out] if role == "eval" else triples[held_out:]
        if config.num_tasks is not None:
            chosen = chosen[: config.num_tasks]
        return [
            Problem(
                id=f"{role}/{index}",
                problem=f"What is {a} {SYMBOLS[op]} {b}?",
                answer=str(_apply(a, op, b)),
            )
            for index, (a, op, b) in enumerate(chosen)
        ]


def _apply(a: int, op: str, b: int) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    return a * b
