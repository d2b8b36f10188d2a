"""Rewrites of a reply that math-verify's extractors would otherwise miss.

math-verify reads ``\\boxed{}``, "final answer is ...", LaTeX and plain numbers, but
not the GSM8K convention ``#### 72`` (it would take whatever number comes last, even
after the marker), nor choice letters written as ``(C)``, ``\\boxed{C}`` or
``**C**``. These functions only move the answer into a form math-verify reads; the
judging itself stays math-verify's.
"""

from __future__ import annotations

import re

# The last "#### answer" line of a reply (GSM8K's answer marker).
HASH_ANSWER = re.compile(r"####[ \t]*([^\n]*)")
THOUSANDS = re.compile(r"^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")


def hash_answer(reply: str) -> str | None:
    """The text after the last ``####`` marker, cleaned of ``$``, commas and a full stop."""
    matches = HASH_ANSWER.findall(reply)
    if not matches:
        return None
    answer = matches[-1].strip().strip("$").strip().rstrip(".").strip()
    if THOUSANDS.match(answer):
        answer = answer.replace(",", "")
    return answer or None


def rewrite_hash_answer(reply: str) -> str:
    """Replace a reply that has a ``#### X`` line by "The final answer is X".

    math-verify then reads X with its "final answer is" anchor, which takes the
    number out of ``18 dollars`` (where ``\\boxed{18 dollars}`` would read as a
    product of symbols). LaTeX answers are wrapped in ``$...$`` so they parse as LaTeX.
    """
    answer = hash_answer(reply)
    if answer is None:
        return reply
    return f"The final answer is ${answer}$." if "\\" in answer else f"The final answer is {answer}."


def choice_patterns(letters: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(boxed letter, other dressed letter) patterns for the given choice letters.

    Boxed: ``\\boxed{C}``, ``\\boxed{(C)}``, ``\\boxed{\\text{C}}``. Dressed: ``(C)``,
    ``C)``, ``**C**``, ``**(C)**``.
    """
    group = f"([{re.escape(letters)}])"
    boxed = re.compile(rf"\\boxed\{{\s*(?:\\text(?:bf)?\{{\s*)?\(?{group}\)?\s*(?:\}}\s*)?\}}")
    dressed = re.compile(rf"\*\*\(?{group}\)?\*\*|\({group}\)|(?<![A-Za-z(]){group}\)")
    return boxed, dressed


def chosen_letter(reply: str, letters: str) -> str | None:
    """The letter a reply marks as its choice: the last boxed one, else the ``####``
    answer, else the last dressed one; ``None`` when the reply dresses no letter."""
    boxed, dressed = choice_patterns(letters)
    found = [m.group(1) for m in boxed.finditer(reply)]
    if found:
        return found[-1]
    answer = hash_answer(reply)
    if answer is not None:
        match = re.fullmatch(rf"\(?([{re.escape(letters)}])\)?", answer)
        if match:
            return match.group(1)
    found = [next(g for g in m.groups() if g) for m in dressed.finditer(reply)]
    return found[-1] if found else None


def normalize_choice_reply(reply: str, letters: str) -> str:
    """Append "The final answer is C." when the reply marks letter C in a way that
    math-verify's string extractor misses; its "final answer is" pattern outranks
    stray capital letters elsewhere in the reply (such as a sentence starting "A")."""
    letter = chosen_letter(reply, letters)
    return reply if letter is None else f"{reply}\nThe final answer is {letter}."
