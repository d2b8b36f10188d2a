"""Answer checking with math-verify, bounded in time in any thread.

    from agentsgym_classical.grading import grade
    verdict = grade("3/4", "so the answer is \\boxed{\\frac{3}{4}}")
    verdict.correct, verdict.answer      # True, "3/4"

A reply first meets cheap guards (:mod:`.guards`: length, bracket nesting), then a
worker process that runs math-verify (:mod:`.judge`) under a hard deadline
(:mod:`.pool`). Every path returns a :class:`Verdict`; none raises or hangs.
"""

from __future__ import annotations

import math

from agentsgym_classical.grading.guards import precheck
from agentsgym_classical.grading.pool import get_pool
from agentsgym_classical.grading.verdict import AnswerKind, GradeRequest, Status, Verdict

__all__ = ["AnswerKind", "GradeRequest", "Status", "Verdict", "grade"]


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
    :param timeout_seconds: wall-clock limit for the whole judgement; math-verify's
        own per-call timeouts inside the worker are a fifth of it (at least 1 s).
    :param max_reply_chars: longer replies are judged wrong (``too_long``) unread.
    """
    rejected = precheck(reply, max_reply_chars)
    if rejected is not None:
        return rejected
    request = GradeRequest(
        gold=gold,
        reply=reply,
        kind=kind,
        choices=choices,
        timeout_seconds=max(1, math.floor(timeout_seconds / 5)),
    )
    return get_pool().grade(request, timeout_seconds)
