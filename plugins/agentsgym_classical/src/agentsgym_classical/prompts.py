"""What the agent reads: the first prompt and the feedback after a failed attempt.

Feedback says why the attempt failed (wrong, no answer found, cut off at the length
limit, too long, could not be checked) without revealing the reference answer, and
quotes the answer it read only when that is clean (:func:`shown_answer`).
"""

from __future__ import annotations

from agentsgym_classical.grading import Verdict

MAX_SHOWN_CHARS = 40
"""Longest answer text feedback quotes back."""
CUT_OFF_DETAIL = "the reply was cut off at the length limit before a final answer"


def first_prompt(problem_text: str, instruction: str, attempts: int) -> str:
    tries = "one attempt" if attempts == 1 else f"up to {attempts} attempts"
    return f"{problem_text}\n\n{instruction}\nYou have {tries}."


def attempts_left(left: int) -> str:
    return "1 attempt left." if left == 1 else f"{left} attempts left."


def shown_answer(verdict: Verdict) -> str | None:
    """The answer to quote back: the text the grader read, else its canonical value,
    whichever is a short, well-formed expression (one line, brackets balanced, at most
    :data:`MAX_SHOWN_CHARS`); ``None`` when neither is (a fragment such as ``3) + 1``)."""
    for text in (verdict.extracted, verdict.answer):
        text = (text or "").strip()
        if text and len(text) <= MAX_SHOWN_CHARS and "\n" not in text and _balanced(text):
            return text
    return None


def _balanced(text: str) -> bool:
    closing = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    for char in text:
        if char in "([{":
            stack.append(char)
        elif char in closing and (not stack or stack.pop() != closing[char]):
            return False
    return not stack


def feedback(verdict: Verdict, instruction: str, left: int) -> str:
    """The message after an attempt that was not correct."""
    if verdict.status == "wrong":
        shown = shown_answer(verdict)
        head = f"{shown} is not correct." if shown else "Your final answer is not correct."
        head += " Check your work and try again."
    elif verdict.detail == CUT_OFF_DETAIL:
        head = (
            "Your reply was cut off at the length limit before a final answer. Reply more "
            f"briefly. {instruction}"
        )
    elif verdict.status == "unparsed":
        head = f"I could not find a final answer in your reply. {instruction}"
    elif verdict.status == "too_long":
        head = f"Your reply is too long to grade ({verdict.detail}). Reply more briefly."
    else:  # too_nested (a reply that could not be graded fails the episode instead)
        head = (
            f"Your answer could not be checked ({verdict.detail or verdict.status}). "
            "Give the final answer in a simpler form."
        )
    return f"{head} {attempts_left(left)}"
