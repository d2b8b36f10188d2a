"""The embedded task family: multi-step arithmetic word problems generated from a seed.

A problem starts with a quantity and applies 2-4 operations (buy, lose, share,
give away a fraction, sell a percentage, ...), each one sentence. Every intermediate
value is a whole number from 1 to 999, so answers are exact. The same seed always
gives the same problem, which is what lets envs, tests and demos run offline.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from agentsgym_classical.arithmetic.ops import OPERATIONS, Step
from agentsgym_classical.errors import GenerationError

Question = Literal["count", "fraction"]

NAMES = (
    "Mia",
    "Noah",
    "Ava",
    "Liam",
    "Zoe",
    "Omar",
    "Lena",
    "Ravi",
    "Sofia",
    "Kenji",
    "Amara",
    "Diego",
    "Hana",
    "Tariq",
    "Elsa",
    "Mateo",
    "Priya",
    "Jonas",
    "Leila",
    "Owen",
)
ITEMS = (
    "apples",
    "marbles",
    "stickers",
    "pencils",
    "coins",
    "books",
    "shells",
    "stamps",
    "cookies",
    "buttons",
    "cards",
    "beads",
    "oranges",
    "toy cars",
    "seashells",
)
COUNT_QUESTION = "How many {items} does {who} have now?"
FRACTION_QUESTION = (
    "What fraction of the {items} {who} started with does {who} have now? "
    "Express your answer as a common fraction."
)


@dataclass(frozen=True)
class WordProblem:
    """A generated problem: who, what, the starting amount and the steps applied."""

    who: str
    items: str
    start: int
    steps: tuple[Step, ...]

    @property
    def final(self) -> Fraction:
        return self.steps[-1].result if self.steps else Fraction(self.start)

    def answer(self, question: Question = "count") -> Fraction:
        return self.final if question == "count" else self.final / self.start

    def text(self, question: Question = "count") -> str:
        template = COUNT_QUESTION if question == "count" else FRACTION_QUESTION
        sentences = [
            f"{self.who} has {self.start} {self.items}.",
            *(s.sentence for s in self.steps),
        ]
        return " ".join([*sentences, template.format(items=self.items, who=self.who)])

    def worked_lines(self) -> list[str]:
        """One line of arithmetic per step, e.g. ``12 + 5 = 17``."""
        return [f"{s.expression} = {format_number(s.result)}" for s in self.steps]


def format_number(value: Fraction) -> str:
    """``17`` or ``3/4``: how answers are written in plain text."""
    return (
        str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    )


def latex_number(value: Fraction) -> str:
    """``17`` or ``\\frac{3}{4}`` (sign outside the fraction)."""
    if value.denominator == 1:
        return str(value.numerator)
    sign = "-" if value < 0 else ""
    return f"{sign}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"


def generate(seed: int | str, *, min_operations: int = 2, max_operations: int = 4) -> WordProblem:
    """The problem of ``seed``: deterministic, whole intermediate values in [1, 999]."""
    rng = random.Random(f"agentsgym-classical/arithmetic/{seed}")
    who, items = rng.choice(NAMES), rng.choice(ITEMS)
    start = rng.choice([rng.randint(5, 120), 12 * rng.randint(1, 10), 20 * rng.randint(1, 6)])
    value = start
    steps: list[Step] = []
    for _ in range(rng.randint(min_operations, max_operations)):
        for operation in rng.sample(OPERATIONS, len(OPERATIONS)):
            step = operation.propose(rng, value, who, items)
            if step is not None and step.result.denominator == 1 and step.result >= 1:
                steps.append(step)
                value = int(step.result)
                break
    return WordProblem(who=who, items=items, start=start, steps=tuple(steps))


def generate_split(
    split: str,
    count: int,
    *,
    seed: int = 0,
    min_operations: int = 2,
    max_operations: int = 4,
    exclude: frozenset[str] = frozenset(),
) -> list[tuple[str, WordProblem]]:
    """``count`` problems of ``split`` as ``(id, problem)``, skipping any whose count
    question is in ``exclude`` (how eval problems are kept out of the train split)."""
    problems: list[tuple[str, WordProblem]] = []
    index = 0
    seen = set(exclude)
    # Duplicates are rare, but a narrow shape could run out of distinct problems: a
    # bounded number of draws, then a clear error instead of a loop that never ends.
    max_draws = 20 * count + 1000
    while len(problems) < count:
        if index >= max_draws:
            raise GenerationError(
                f"only {len(problems)} distinct {split} problems in {max_draws} draws with "
                f"{min_operations}-{max_operations} operations; ask for fewer (num_tasks) "
                "or allow more operations"
            )
        problem = generate(
            f"{seed}/{split}/{index}", min_operations=min_operations, max_operations=max_operations
        )
        text = problem.text()
        if text not in seen:
            seen.add(text)
            problems.append((f"{split}/{index}", problem))
        index += 1
    return problems
