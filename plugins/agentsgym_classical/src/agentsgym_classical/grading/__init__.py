"""Answer checking with math-verify, bounded in time in any thread.

    from agentsgym_classical.grading import grade
    verdict = grade("3/4", "so the answer is \\boxed{\\frac{3}{4}}")
    verdict.correct, verdict.answer      # True, "3/4"

A reply first meets cheap guards (:mod:`.guards`: length, bracket nesting), then a
worker process that runs math-verify (:mod:`.judge`) under a hard deadline
(:mod:`.pool`). Every path returns a :class:`Verdict`; none raises or hangs.

"The machine was slow" is never "wrong": when math-verify's own timeout or the hard
deadline expires, the verdict is ``timeout``, and that reply is judged once more with
:data:`RETRY_FACTOR` times the budget (both math-verify's per-call timeout and the
deadline). A second timeout is the verdict (``attempts == 2``); envs report it as
ungraded (``info["graded"] = False``) and ``agentsgym eval`` counts it apart.
"""

from __future__ import annotations

import logging
import math

from agentsgym_classical.grading.guards import precheck
from agentsgym_classical.grading.pool import get_pool
from agentsgym_classical.grading.verdict import AnswerKind, GradeRequest, Status, Verdict

__all__ = ["RETRY_FACTOR", "AnswerKind", "GradeRequest", "Status", "Verdict", "grade"]

logger = logging.getLogger(__name__)

RETRY_FACTOR = 4
"""A reply whose grading timed out is graded once more with this many times the budget."""


def grade(
    gold: str,
    reply: str,
    *,
    kind: AnswerKind = "math",
    choices: dict[str, str] | None = None,
    timeout_seconds: float = 5.0,
    max_reply_chars: int = 100_000,
) -> Verdict:
    """Judge ``reply`` against the reference answer ``gold``.

    :param kind: ``"math"`` (numbers, fractions, percentages, LaTeX, ``\\boxed{}``,
        ``#### N``) or ``"choice"`` (a letter among ``choices``).
    :param timeout_seconds: wall-clock limit for one judgement; math-verify's own
        per-call timeouts inside the worker are a fifth of it (at least 1 s). A
        judgement that times out is retried once with :data:`RETRY_FACTOR` times both.
    :param max_reply_chars: longer replies are judged wrong (``too_long``) unread.
    """
    rejected = precheck(reply, max_reply_chars)
    if rejected is not None:
        return rejected
    per_call = max(1, math.floor(timeout_seconds / 5))

    def request(budget: int) -> GradeRequest:
        return GradeRequest(
            gold=gold, reply=reply, kind=kind, choices=choices, timeout_seconds=budget
        )

    pool = get_pool()
    first = pool.grade(request(per_call), timeout_seconds)
    if first.status != "timeout":
        return first
    logger.info("grading timed out (%s); retrying with %dx the budget", first.detail, RETRY_FACTOR)
    second = pool.grade(request(per_call * RETRY_FACTOR), timeout_seconds * RETRY_FACTOR)
    second.attempts = 2
    second.seconds += first.seconds
    return second
