"""The operations of the generated word problems: one sentence, one exact step.

Each operation knows when it applies to the current quantity (so every intermediate
value stays a whole number between 1 and 999), how to phrase itself, how to apply
itself, and the regular expression that reads it back. The generator and the
scripted solver share these definitions, so the solver reads exactly what the
generator writes.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

MAX_VALUE = 999
TIMES = {"doubles": 2, "triples": 3, "quadruples": 4}


@dataclass(frozen=True)
class Step:
    """One applied operation: the sentence, the arithmetic shown in solutions, the result."""

    sentence: str
    expression: str
    result: Fraction


class Operation:
    """An operation kind: subclasses define ``pattern``, ``propose`` and ``apply``."""

    name: ClassVar[str] = ""
    pattern: ClassVar[re.Pattern[str]] = re.compile("(?!)")

    def propose(self, rng: random.Random, value: int, who: str, items: str) -> Step | None:
        """A step from ``value``, or ``None`` when this operation cannot apply to it."""
        raise NotImplementedError

    def apply(self, value: Fraction, match: re.Match[str]) -> tuple[Fraction, str]:
        """The new value and the arithmetic, from a sentence matched by ``pattern``."""
        raise NotImplementedError


WHO = r"[A-Z][a-z]+"
ITEMS = r"[a-z]+(?: [a-z]+)?"


class Add(Operation):
    name = "add"
    pattern = re.compile(rf"^{WHO} (?:buys|finds) (?P<k>\d+) more {ITEMS}\.$")

    def propose(self, rng: random.Random, value: int, who: str, items: str) -> Step | None:
        k = rng.randint(2, 60)
        if value + k > MAX_VALUE:
            return None
        verb = rng.choice(["buys", "finds"])
        return Step(f"{who} {verb} {k} more {items}.", f"{value} + {k}", Fraction(value + k))

    def apply(self, value: Fraction, match: re.Match[str]) -> tuple[Fraction, str]:
        k = int(match["k"])
        return value + k, f"{value} + {k}"


class AddGroups(Operation):
    name = "add_groups"
    pattern = re.compile(
        rf"^{WHO} (?:buys|gets) (?P<g>\d+) (?:packs|boxes) with (?P<m>\d+) {ITEMS} in each\.$"
    )

    def propose(self, rng: random.Random, value: int, who: str, items: str) -> Step | None:
        g, m = rng.randint(2, 6), rng.randint(2, 12)
        if value + g * m > MAX_VALUE:
            return None
        verb, box = rng.choice([("buys", "packs"), ("gets", "boxes")])
        return Step(
            f"{who} {verb} {g} {box} with {m} {items} in each.",
            f"{value} + {g} * {m}",
            Fraction(value + g * m),
        )

    def apply(self, value: Fraction, match: re.Match[str]) -> tuple[Fraction, str]:
        g, m = int(match["g"]), int(match["m"])
        return value + g * m, f"{value} + {g} * {m}"


class Subtract(Operation):
    name = "subtract"
    pattern = re.compile(
        rf"^{WHO} (?:gives (?P<k1>\d+) {ITEMS} to a friend|loses (?P<k2>\d+) {ITEMS})\.$"
    )

    def propose(self, rng: random.Random, value: int, who: str, items: str) -> Step | None:
        if value < 3:
            return None
        k = rng.randint(1, min(value - 1, 60))
        sentence = rng.choice(
            [f"{who} gives {k} {items} to a friend.", f"{who} loses {k} {items}."]
        )
        return Step(sentence, f"{value} - {k}", Fraction(value - k))

    def apply(self, value: Fraction, match: re.Match[str]) -> tuple[Fraction, str]:
        k = int(match["k1"] or match["k2"])
        return value - k, f"{value} - {k}"


class Multiply(Operation):
    name = "multiply"
    pattern = re.compile(rf"^The number of {ITEMS} {WHO} has (?P<times>{'|'.join(TIMES)})\.$")

    def propose(self, rng: random.Random, value: int, who: str, items: str) -> Step | None:
        word = rng.choice(list(TIMES))
        if value * TIMES[word] > MAX_VALUE:
            return None
        return Step(
            f"The number of {items} {who} has {word}.",
            f"{value} * {TIMES[word]}",
            Fraction(value * TIMES[word]),
        )

    def apply(self, value: Fraction, match: re.Match[str]) -> tuple[Fraction, str]:
        factor = TIMES[match["times"]]
        return value * factor, f"{value} * {factor}"


class Share(Operation):
    name = "share"
    pattern = re.compile(
        rf"^{WHO} splits the {ITEMS} equally into (?P<n>\d+) bags and keeps only one bag\.$"
    )

    def propose(self, rng: random.Random, value: int, who: str, items: str) -> Step | None:
        divisors = [n for n in range(2, 7) if value % n == 0]
        if not divisors:
            return None
        n = rng.choice(divisors)
        return Step(
            f"{who} splits the {items} equally into {n} bags and keeps only one bag.",
            f"{value} / {n}",
            Fraction(value, n),
        )

    def apply(self, value: Fraction, match: re.Match[str]) -> tuple[Fraction, str]:
        n = int(match["n"])
        return value / n, f"{value} / {n}"


class GiveFraction(Operation):
    name = "give_fraction"
    pattern = re.compile(rf"^{WHO} gives away (?P<p>\d+)/(?P<q>\d+) of the {ITEMS}\.$")

    def propose(self, rng: random.Random, value: int, who: str, items: str) -> Step | None:
        options = [
            (p, q)
            for q in (2, 3, 4, 5)
            for p in range(1, q)
            if value % q == 0 and Fraction(p, q).denominator == q
        ]
        if not options:
            return None
        p, q = rng.choice(options)
        left = Fraction(value) * (1 - Fraction(p, q))
        return Step(
            f"{who} gives away {p}/{q} of the {items}.", f"{value} - {value} * {p}/{q}", left
        )

    def apply(self, value: Fraction, match: re.Match[str]) -> tuple[Fraction, str]:
        p, q = int(match["p"]), int(match["q"])
        return value * (1 - Fraction(p, q)), f"{value} - {value} * {p}/{q}"


class SellPercent(Operation):
    name = "sell_percent"
    pattern = re.compile(rf"^{WHO} sells (?P<pct>\d+)% of the {ITEMS}\.$")

    def propose(self, rng: random.Random, value: int, who: str, items: str) -> Step | None:
        options = [pct for pct in (10, 20, 25, 50, 75) if value * (100 - pct) % 100 == 0]
        if not options:
            return None
        pct = rng.choice(options)
        return Step(
            f"{who} sells {pct}% of the {items}.",
            f"{value} - {value} * {pct}/100",
            Fraction(value * (100 - pct), 100),
        )

    def apply(self, value: Fraction, match: re.Match[str]) -> tuple[Fraction, str]:
        pct = int(match["pct"])
        return value * (1 - Fraction(pct, 100)), f"{value} - {value} * {pct}/100"


OPERATIONS: tuple[Operation, ...] = (
    Add(),
    AddGroups(),
    Subtract(),
    Multiply(),
    Share(),
    GiveFraction(),
    SellPercent(),
)
