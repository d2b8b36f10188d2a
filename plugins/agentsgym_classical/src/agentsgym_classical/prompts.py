"""What the agent reads: the first prompt and the feedback after a failed attempt.

Feedback says why the attempt failed (wrong, no answer found, too long, could not be
checked) without revealing the reference answer.
"""

from __future__ import annotations

from agentsgym_classical.grading import Verdict


def first_prompt(problem_text: str, instruction: str, attempts: int) -> str:
    tries = "one attempt" if attempts == 1 else f"up to {attempts} attempts"
    return f"{problem_text}\n\n{instruction}\nYou have {tries}."


def attempts_left(left: int) -> str:
    return "1 attempt left." if left == 1 else f"{left} attempts left."


def feedback(verdict: Verdict, instruction: str, left: int) -> str:
    """The message after an attempt that was not correct."""
    if verdict.status == "wrong":
        shown = verdict.extracted or verdict.answer or "your answer"
        head = f"{shown} is not correct. Check your work and try again."
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
