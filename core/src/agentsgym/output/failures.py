"""How many trials of a run failed, why (errors grouped), and whether that fails the run.

Trials whose reward could not be computed (:class:`~agentsgym.errors.RewardUnavailableError`:
a judge model failed) are failures like any other, and are also counted apart.

Errors are grouped by their *shape*: numbers, hex ids and quoted values blanked out,
so "target 150 is outside [1, 100]" and "target 7 is outside [10, 20]" count as one.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from pydantic import BaseModel, Field

from agentsgym.errors import is_reward_unavailable

_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_HEX = re.compile(r"\b(0x)?[0-9a-f]{8,}\b", re.IGNORECASE)
_NUMBER = re.compile(r"\d+(\.\d+)?")
MAX_MESSAGE = 300


class ErrorGroup(BaseModel):
    """Errors of one shape: how many, and the first one seen."""

    count: int
    example: str


class FailureReport(BaseModel):
    """Failed trials of a run and their most common errors."""

    total: int = Field(description="trials (task, rollout) in the output")
    failed: int
    reward_unavailable: int = Field(
        default=0, description="failed trials whose reward could not be computed (a judge failed)"
    )
    common_errors: list[ErrorGroup] = Field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.failed / self.total if self.total else 0.0

    def fails_run(self, max_failure_rate: float | None = None) -> bool:
        """Every trial failed, or more than ``max_failure_rate`` of them did."""
        if self.failed == self.total:
            return self.total > 0
        return max_failure_rate is not None and self.rate > max_failure_rate

    def verdict(self, max_failure_rate: float | None = None) -> str:
        """One line saying why the run failed (or that it did not)."""
        if not self.fails_run(max_failure_rate):
            return f"{self.failed} of {self.total} trials failed"
        if self.failed == self.total:
            return f"every trial failed ({self.failed} of {self.total})"
        return (
            f"{self.failed} of {self.total} trials failed ({self.rate:.1%}), above "
            f"--max-failure-rate {max_failure_rate:g}"
        )


def error_shape(message: str) -> str:
    """``message`` with its particulars (numbers, ids, quoted values) blanked out."""
    shape = _QUOTED.sub("'…'", message[:MAX_MESSAGE])
    shape = _HEX.sub("…", shape)
    return _NUMBER.sub("N", shape)


def failure_report(errors: Iterable[str | None], *, top: int = 3) -> FailureReport:
    """A report from the ``error`` of every trial (None: the trial succeeded)."""
    total = 0
    counts: Counter[str] = Counter()
    examples: dict[str, str] = {}
    unscored = 0
    for error in errors:
        total += 1
        if error is None:
            continue
        unscored += is_reward_unavailable(error)
        shape = error_shape(error)
        counts[shape] += 1
        example = error if len(error) <= MAX_MESSAGE else error[:MAX_MESSAGE] + "…"
        examples.setdefault(shape, example)
    return FailureReport(
        total=total,
        failed=sum(counts.values()),
        reward_unavailable=unscored,
        common_errors=[
            ErrorGroup(count=count, example=examples[shape])
            for shape, count in counts.most_common(top)
        ],
    )
