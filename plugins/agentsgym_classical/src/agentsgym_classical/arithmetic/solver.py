"""Reading a generated word problem back and solving it exactly.

The solver matches each sentence against the operations' own patterns (see
:mod:`.ops`), so it solves exactly the family the generator writes, and nothing
else: a sentence it does not recognise makes it give up rather than guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from agentsgym_classical.arithmetic.ops import ITEMS, OPERATIONS, WHO

START = re.compile(rf"^{WHO} has (?P<n>\d+) {ITEMS}\.$")
COUNT = re.compile(rf"^How many {ITEMS} does {WHO} have now\?$")
FRACTION = re.compile(rf"^What fraction of the {ITEMS} {WHO} started with does {WHO} have now\?$")
SENTENCE_END = re.compile(r"(?<=[.?])\s+")


@dataclass(frozen=True)
class Solution:
    """The exact answer and the arithmetic of each step."""

    answer: Fraction
    lines: tuple[str, ...]


def solve_text(text: str) -> Solution | None:
    """Solve the first generated problem found in ``text`` (None if there is none)."""
    sentences = [s.strip() for s in SENTENCE_END.split(text.strip()) if s.strip()]
    for offset, sentence in enumerate(sentences):
        start = START.match(sentence)
        if start is not None:
            return _solve_from(sentences[offset + 1 :], Fraction(int(start["n"])))
    return None


def _solve_from(sentences: list[str], start: Fraction) -> Solution | None:
    value = start
    lines: list[str] = []
    for sentence in sentences:
        if COUNT.match(sentence):
            return Solution(value, tuple(lines))
        if FRACTION.match(sentence):
            return Solution(value / start, (*lines, f"{value} / {start}"))
        for operation in OPERATIONS:
            match = operation.pattern.match(sentence)
            if match is not None:
                value, shown = operation.apply(value, match)
                lines.append(f"{shown} = {value}")
                break
        else:
            return None
    return None
