"""How a judge's reply becomes a score.

A parser is any callable ``(reply: str) -> float``; it raises :class:`ValueError` (or
returns ``None``) when the reply holds no score. The judge then fails the judgement
(:class:`~agentsgym.errors.RewardUnavailableError`) rather than score it 0: a judge
that rambles is not evidence against the answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable

Parser = Callable[[str], "float | None"]

_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)")


def yes_no(reply: str) -> float:
    """1.0 for "yes", 0.0 for "no": the first of the two words in the reply (any case)."""
    found = _YES_NO.search(reply)
    if found is None:
        raise ValueError("the reply says neither yes nor no")
    return 1.0 if found.group(1).lower() == "yes" else 0.0


def number(low: float = 0.0, high: float = 1.0, *, scale: bool = True) -> Parser:
    """A parser reading the first number of the reply, which must lie in [low, high];
    the score is that number scaled to [0, 1] (``scale=False``: the number itself)."""
    if not high > low:
        raise ValueError(f"number(low, high) needs high > low, got {low} and {high}")

    def parse(reply: str) -> float:
        found = _NUMBER.search(reply)
        if found is None:
            raise ValueError("the reply holds no number")
        value = float(found.group())
        if not low <= value <= high:
            raise ValueError(f"the reply's number {value:g} is outside [{low:g}, {high:g}]")
        return (value - low) / (high - low) if scale else value

    parse.__name__ = parse.__qualname__ = f"number({low:g}, {high:g})"
    return parse


def parser_name(parser: Parser) -> str:
    """How messages name a parser."""
    return getattr(parser, "__qualname__", None) or type(parser).__name__
