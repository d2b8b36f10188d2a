"""The judgement itself: math-verify's ``parse`` and ``verify``.

This module runs inside the grading worker process, in its main thread, where
math-verify's ``signal.alarm`` timeouts work (they raise ``ValueError`` in any other
thread, and with them disabled a reply like ``9^9^9^9^9`` holds the GIL and stalls
the whole process). The parent process bounds the worker with a hard deadline on top.

A math-verify timeout is never a judgement: left to itself math-verify logs it and
answers "no match" (``verify``) or "nothing found" (``parse``), which on a busy
machine turns a correct answer into ``wrong``. Here both are called with
``raise_on_error=True``, a timeout becomes a ``timeout`` verdict (the caller retries
it with a larger budget, see :func:`agentsgym_classical.grading.grade`), and any
other error keeps math-verify's own meaning (no match, nothing parsed).

math-verify reads a reply's answer region only, never more than about 3,000
characters (:func:`~agentsgym_classical.grading.normalize.answer_region`): the cost of
its regexes grows with the square (and worse) of what it reads, so a whole 100 kB
reply of repeated numbers could not be judged in any budget, while its region is
judged in milliseconds, the same on any machine. What it costs to judge a reply is
thereby bounded by the reply's text, not measured by a clock, and a timeout is left to
mean what it should: the machine was too busy (or an answer's value explodes, such as
``9^9^9^9^9``, which no budget judges).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from math_verify import (
    ExprExtractionConfig,
    LatexExtractionConfig,
    StringExtractionConfig,
    parse,
    verify,
)
from math_verify.errors import TimeoutException

from agentsgym_classical.grading.normalize import (
    answer_region,
    answer_tail,
    normalize_choice_reply,
    rewrite_hash_answer,
)
from agentsgym_classical.grading.verdict import GradeRequest, Verdict

MAX_ANSWER_CHARS = 200

# \boxed{} first: a reply that boxes an answer means that one, whatever follows it.
MATH_TARGETS = (LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig())


class _CanonicalTimeout(Exception):
    pass


@contextmanager
def _alarm(seconds: int) -> Iterator[None]:
    def expire(signum: int, frame: Any) -> None:
        raise _CanonicalTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


class GradingTimeout(Exception):
    """math-verify ran out of its time budget: the reply was not judged."""


def _parse(text: str, extraction_config: Any, timeout: int) -> list[Any]:
    """math-verify's ``parse``; its timeout raises :class:`GradingTimeout`, any other
    error means nothing was found (as math-verify itself treats it)."""
    try:
        return parse(
            text, extraction_config=extraction_config, parsing_timeout=timeout,
            raise_on_error=True,
        )
    except TimeoutException as exc:  # a BaseException: not caught below
        raise GradingTimeout(f"math-verify's parse took more than {timeout}s") from exc
    except Exception:  # noqa: BLE001 - math-verify's own meaning of a parse error
        return []


def _verify(gold: list[Any], predicted: list[Any], timeout: int) -> bool:
    """math-verify's ``verify`` pair by pair (as it does itself): a pair that times out
    is remembered, and when no pair matches the judgement is a timeout, not ``wrong``."""
    timed_out = False
    for expected in gold:
        for answer in predicted:
            try:
                if verify(expected, answer, timeout_seconds=timeout, raise_on_error=True):
                    return True
            except TimeoutException:
                timed_out = True
            except Exception:  # noqa: BLE001 - an error comparing one pair: no match
                continue
    if timed_out:
        raise GradingTimeout(f"math-verify's verify took more than {timeout}s")
    return False


@lru_cache(maxsize=4096)
def _parse_gold(gold: str, timeout: int) -> list[Any]:
    # A timeout raises, so it is never cached as the gold's meaning.
    parsed = _parse(f"$\\boxed{{{gold}}}$", MATH_TARGETS, timeout)
    return parsed or [gold]


def _parse_math(text: str, timeout: int) -> list[Any]:
    """A math answer, read from the text's answer region only (see
    :func:`~agentsgym_classical.grading.normalize.answer_region`)."""
    return _parse(answer_region(text), MATH_TARGETS, timeout)


def canonical(parsed: list[Any], timeout: int) -> str | None:
    """One string per value, so equal answers vote together in cons@k.

    Numbers become exact rationals (``18.00`` -> ``18``, ``0.75`` -> ``3/4``,
    ``20%`` -> ``1/5``); other expressions their SymPy string. Falls back to the
    extracted text when simplifying fails or takes too long.
    """
    if not parsed:
        return None
    value = parsed[0]
    text = parsed[-1] if isinstance(parsed[-1], str) else str(value)
    if isinstance(value, str):
        return value.strip()[:MAX_ANSWER_CHARS] or None
    try:
        import sympy

        with _alarm(timeout):
            if isinstance(value, sympy.Basic) and _cheap_to_evaluate(value, sympy):
                value = value.doit()
            if isinstance(value, sympy.Float):
                value = sympy.Rational(str(value))
            text = str(value)
    except Exception:  # noqa: BLE001 - any failure keeps the extracted text
        pass
    return text[:MAX_ANSWER_CHARS]


def _cheap_to_evaluate(value: Any, sympy: Any) -> bool:
    """A plain number whose evaluation cannot explode: no functions (``(10^{10})!``)
    and no powers with a non-numeric exponent (``9^{9^{9}}``)."""
    if not value.is_number or value.atoms(sympy.Function):
        return False
    return all(p.exp.is_Number and abs(p.exp) <= 64 for p in value.atoms(sympy.Pow))


def judge_math(request: GradeRequest) -> Verdict:
    """Numbers, fractions, percentages, LaTeX, ``\\boxed{}`` and ``#### N`` answers."""
    timeout = request.timeout_seconds
    predicted = _parse_math(rewrite_hash_answer(request.reply), timeout)
    if not predicted:
        return Verdict(status="unparsed", detail="no final answer found in the reply")
    correct = _verify(_parse_gold(request.gold, timeout), predicted, timeout)
    return Verdict(
        status="correct" if correct else "wrong",
        answer=canonical(predicted, timeout),
        extracted=_extracted(predicted),
    )


def judge_choice(request: GradeRequest) -> Verdict:
    """A choice letter (``C``, ``(C)``, ``\\boxed{C}``), or the value of exactly one option."""
    choices = request.choices or {}
    letters = "".join(sorted(choices)) or "ABCDE"
    timeout = request.timeout_seconds
    found = _parse(
        answer_tail(normalize_choice_reply(request.reply, letters)),
        [StringExtractionConfig(strings=tuple(letters), lowercase=False)],
        timeout,
    )
    letter = found[0].upper() if found and isinstance(found[0], str) else None
    if letter is None:
        letter = _choice_by_value(request.reply, choices, timeout)
    if letter is None:
        return Verdict(status="unparsed", detail="no choice letter found in the reply")
    gold = request.gold.strip().upper()
    return Verdict(status="correct" if letter == gold else "wrong", answer=letter, extracted=letter)


def _choice_by_value(reply: str, choices: dict[str, str], timeout: int) -> str | None:
    """The letter whose option equals the reply's final value, when exactly one does."""
    predicted = _parse_math(rewrite_hash_answer(reply), timeout)
    if not predicted:
        return None
    matches = [
        letter
        for letter, option in sorted(choices.items())
        if (gold := _parse_math(option, timeout)) and _verify(gold, predicted, timeout)
    ]
    return matches[0] if len(matches) == 1 else None


def _extracted(parsed: list[Any]) -> str | None:
    text = next((p for p in reversed(parsed) if isinstance(p, str)), None)
    return None if text is None else text[:MAX_ANSWER_CHARS]


def judge(request: GradeRequest) -> Verdict:
    """Judge one reply; never raises (an internal error is an ``error`` verdict)."""
    try:
        if request.kind == "choice":
            return judge_choice(request)
        return judge_math(request)
    except GradingTimeout as exc:
        return Verdict(status="timeout", detail=str(exc))
    except Exception as exc:  # noqa: BLE001 - a grader bug must not look like a crash of the run
        return Verdict(status="error", detail=f"{type(exc).__name__}: {str(exc)[:200]}")
