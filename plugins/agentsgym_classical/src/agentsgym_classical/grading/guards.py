"""Cheap checks run before a reply reaches math-verify.

They turn replies no grader should spend time on into a wrong verdict at once: a
reply longer than the configured limit (a 1 MB reply is judged wrong, not searched
for an answer), or one whose brackets nest deeper than any real answer does (parsing
deep nesting is what makes LaTeX parsers slow). Of the rest math-verify reads only
the answer region (:func:`agentsgym_classical.grading.normalize.answer_region`), so
what a reply costs to judge is bounded by its text; the worker's deadline (see
:mod:`agentsgym_classical.grading.pool`) is for a busy machine and for answers whose
value explodes.
"""

from __future__ import annotations

from agentsgym_classical.grading.verdict import Verdict

MAX_NESTING = 48
OPENERS = frozenset("{([")
CLOSERS = frozenset("})]")


def nesting_depth(text: str) -> int:
    """The deepest bracket nesting in ``text`` (``{``, ``(`` and ``[`` alike).

    Unbalanced closers are ignored, so unbalanced LaTeX is measured, not rejected.
    """
    depth = deepest = 0
    for char in text:
        if char in OPENERS:
            depth += 1
            if depth > deepest:
                deepest = depth
        elif char in CLOSERS and depth:
            depth -= 1
    return deepest


def precheck(reply: str, max_reply_chars: int, max_nesting: int = MAX_NESTING) -> Verdict | None:
    """A verdict when the reply fails a guard, ``None`` when it may be graded."""
    if len(reply) > max_reply_chars:
        return Verdict(
            status="too_long",
            detail=f"reply has {len(reply)} characters; the limit is {max_reply_chars}",
        )
    depth = nesting_depth(reply)
    if depth > max_nesting:
        return Verdict(
            status="too_nested",
            detail=f"brackets nest {depth} deep; the limit is {max_nesting}",
        )
    return None
