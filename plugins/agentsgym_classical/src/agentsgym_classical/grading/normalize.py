"""What of a reply math-verify reads, and rewrites its extractors would otherwise miss.

math-verify reads ``\\boxed{}``, "final answer is ...", LaTeX and plain numbers, but
not the GSM8K convention ``#### 72`` (it would take whatever number comes last, even
after the marker), nor choice letters written as ``(C)``, ``\\boxed{C}`` or
``**C**``. These functions only move the answer into a form math-verify reads; the
judging itself stays math-verify's.

math-verify also never reads a whole long reply: only its answer region
(:func:`answer_region`, :func:`answer_tail`), at most about 3,000 characters. Its
extraction regexes backtrack over the text they are given: a quadratic number of
steps over a run of numbers and spaces or of ``\\(`` (``"1 " * 50000`` did not
finish in 35 s), a quartic one over repeated ``\\[\\boxed{a}`` (16 s for 2,000
characters). Cut to its region, a reply is judged in milliseconds, about a second at
most (of about 1,300 random repeated patterns of LaTeX and number tokens the worst
took 0.5 s; a contrived list of six boxed answers followed by 2,000 ``}`` takes 1.2
s), so a long degenerate reply gets the verdict of its region (``wrong`` or
``unparsed``), the same on any machine under any load, instead of timing out. The
region holds the answer of every reply that states it where the envs ask for it: in
``\\boxed{}``, on a ``####`` line or at the end.
"""

from __future__ import annotations

import re

ANSWER_REGION_CHARS = 2_000
"""How much of a reply after its last ``\\boxed{`` (or, without one, at its end)
math-verify reads."""
BOXED = "\\boxed{"
MAX_BOXES = 6
"""math-verify reads up to six boxed answers joined by ``and``, ``or`` or commas as one
answer (``$\\boxed{2}$ and $\\boxed{3}$`` is the set {2, 3}): the region keeps as many."""
BOX_GAP = 200
"""Boxed answers whose starts are at most this far apart belong to one such list."""
BOX_PREFIX = 32
"""Characters kept before the first boxed answer of the list (``$x = `` of ``$x = \\boxed{2}$``)."""

# The last "#### answer" line of a reply (GSM8K's answer marker).
HASH_ANSWER = re.compile(r"####[ \t]*([^\n]*)")
THOUSANDS = re.compile(r"^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")


def has_final_answer_marker(reply: str) -> bool:
    """Whether a reply marks a final answer explicitly: a ``\\boxed{`` or a ``####``."""
    return BOXED in reply or "####" in reply


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
    return (
        f"The final answer is ${answer}$." if "\\" in answer else f"The final answer is {answer}."
    )


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


def answer_region(text: str) -> str:
    """The part of a (rewritten) reply that math-verify reads for a math answer.

    A reply with ``\\boxed{`` is read from shortly before its last boxed answer (with
    the boxed answers just before it that form one list with it, at most
    :data:`MAX_BOXES` in all) to :data:`ANSWER_REGION_CHARS` characters after it:
    math-verify takes a boxed answer before anything else, and the last one when there
    are several. A reply without one is read from its last
    :data:`ANSWER_REGION_CHARS` characters, where a final answer stands. At most
    ``BOX_PREFIX + (MAX_BOXES - 1) * BOX_GAP + ANSWER_REGION_CHARS`` characters, holding
    at most :data:`MAX_BOXES` boxed answers (the quartic regex case needs many).
    """
    last = text.rfind(BOXED)
    if last < 0:
        return text[-ANSWER_REGION_CHARS:]
    first, boxes = last, 1
    while boxes < MAX_BOXES:
        previous = text.rfind(BOXED, max(0, first - BOX_GAP), first)
        if previous < 0:
            break
        first, boxes = previous, boxes + 1
    # the prefix never reaches back into a boxed answer left out of the list
    earlier = text.rfind(BOXED, 0, first)
    start = max(first - BOX_PREFIX, 0 if earlier < 0 else earlier + len(BOXED))
    return text[start : last + ANSWER_REGION_CHARS]


def answer_tail(text: str) -> str:
    """The part of a (normalized) reply that math-verify reads for a choice letter: its
    last :data:`ANSWER_REGION_CHARS` characters, which end with the sentence
    :func:`normalize_choice_reply` appends for a marked letter."""
    return text[-ANSWER_REGION_CHARS:]
