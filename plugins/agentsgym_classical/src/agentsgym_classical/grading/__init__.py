"""Answer checking with math-verify, bounded in time in any thread.

    from agentsgym_classical.grading import grade
    verdict = grade("3/4", "so the answer is \\boxed{\\frac{3}{4}}")
    verdict.correct, verdict.answer      # True, "3/4"

A reply first meets cheap guards (:mod:`.guards`: length, bracket nesting), then a
worker process that runs math-verify (:mod:`.judge`) under a hard deadline
(:mod:`.pool`). Every path returns a :class:`Verdict`; none raises or hangs.

What a reply costs to judge is bounded by its text, not measured by a clock:
math-verify reads only the reply's answer region, from shortly before its last
``\\boxed{`` on, else its last 2,000 characters
(:func:`~agentsgym_classical.grading.normalize.answer_region`). A long degenerate
reply (``"1 " * 50000``, which math-verify could not read whole in any budget) is
judged by its region in milliseconds: ``wrong`` or ``unparsed``, the same verdict on
any machine under any load. So a timeout means the machine was too busy, or an
answer whose value explodes (``9^9^9^9^9``) that no budget judges.

"The machine was slow" is never "wrong": when math-verify's own timeout or the hard
deadline expires (or the worker dies), the verdict is ungraded (``timeout`` or
``error``), and the reply is graded again, each try with :data:`RETRY_FACTOR` times
the last one's budget (both math-verify's per-call timeout and the deadline), as long
as the tries' deadlines add up to at most ``budget_seconds`` (:func:`try_deadlines`).
Only when every try failed is the verdict ungraded (``attempts`` says how many tries
there were); the envs then fail the episode with a
:class:`~agentsgym_classical.errors.GradingError` rather than score a reply nobody
judged.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator

from agentsgym_classical.grading.guards import precheck
from agentsgym_classical.grading.pool import get_pool
from agentsgym_classical.grading.verdict import AnswerKind, GradeRequest, Status, Verdict

__all__ = [
    "DEFAULT_BUDGET_SECONDS",
    "RETRY_FACTOR",
    "AnswerKind",
    "GradeRequest",
    "Status",
    "Verdict",
    "grade",
    "try_deadlines",
]

logger = logging.getLogger(__name__)

RETRY_FACTOR = 4
"""Each new try at a reply that could not be graded gets this many times the budget of
the last one."""
DEFAULT_BUDGET_SECONDS = 120.0
"""The deadlines of all tries at one reply add up to at most this: 5 s, 20 s and 80 s
with the default 5 s deadline. Two tries (25 s) were not enough on a loaded machine:
correct replies came back ``timeout`` and were scored as unparsed."""


def try_deadlines(first: float, budget: float) -> Iterator[float]:
    """The deadline of each try: ``first``, then :data:`RETRY_FACTOR` times the last, as
    long as they add up to at most ``budget``. The first try is always made."""
    deadline = first
    spent = 0.0
    while spent == 0.0 or spent + deadline <= budget * (1 + 1e-9):  # 0.3 + 1.2 fits 1.5
        yield deadline
        spent += deadline
        deadline *= RETRY_FACTOR


def first_call_seconds(deadline: float) -> int:
    """math-verify's own per-call timeout inside the worker on the first try: a fifth of
    the deadline, at least 1 s (its alarm counts whole seconds). It grows with the
    deadline, by :data:`RETRY_FACTOR` a try."""
    return max(1, math.floor(deadline / 5))


def grade(
    gold: str,
    reply: str,
    *,
    kind: AnswerKind = "math",
    choices: dict[str, str] | None = None,
    timeout_seconds: float = 5.0,
    budget_seconds: float = DEFAULT_BUDGET_SECONDS,
    max_reply_chars: int = 100_000,
) -> Verdict:
    """Judge ``reply`` against the reference answer ``gold``.

    :param kind: ``"math"`` (numbers, fractions, percentages, LaTeX, ``\\boxed{}``,
        ``#### N``) or ``"choice"`` (a letter among ``choices``).
    :param timeout_seconds: wall-clock limit of the first try; math-verify's own
        per-call timeouts inside the worker are a fifth of it (at least 1 s).
    :param budget_seconds: a reply that could not be graded (``timeout``, ``error``)
        is graded again with :data:`RETRY_FACTOR` times the last try's budgets, while
        the tries' deadlines add up to at most this (:func:`try_deadlines`).
    :param max_reply_chars: longer replies are judged wrong (``too_long``) unread;
        of the others math-verify reads the answer region only (see above).
    :returns: the verdict; ungraded (``verdict.graded`` false) only when every try
        failed, with ``attempts`` the number of tries and ``seconds`` their total.
    """
    rejected = precheck(reply, max_reply_chars)
    if rejected is not None:
        return rejected
    pool = get_pool()
    verdict: Verdict | None = None
    attempts = 0
    seconds = 0.0
    per_call = first_call_seconds(timeout_seconds)
    for deadline in try_deadlines(timeout_seconds, budget_seconds):
        if verdict is not None:
            logger.info(
                "grading try %d was not judged (%s: %s); grading again within %gs",
                attempts,
                verdict.status,
                verdict.detail,
                deadline,
            )
        request = GradeRequest(
            gold=gold,
            reply=reply,
            kind=kind,
            choices=choices,
            timeout_seconds=per_call * RETRY_FACTOR**attempts,
        )
        verdict = pool.grade(request, deadline)
        attempts += 1
        seconds += verdict.seconds
        if verdict.graded:
            break
    assert verdict is not None  # try_deadlines always yields the first try
    verdict.attempts = attempts
    verdict.seconds = seconds
    return verdict
