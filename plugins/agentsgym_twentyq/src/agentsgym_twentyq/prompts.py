"""What the player reads: the rules, then per turn the answer, history and turn count.

The rules follow TextArena's player prompt (``TwentyQuestionsEnv._prompt``), with the
real turn limit instead of its fixed "20 questions" and the guess format this env
accepts. The answer line always starts a turn message as ``Gamemaster: <answer>``.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentsgym_twentyq.words import Level, Secret

OUT_OF_QUESTIONS = "You have run out of questions. What is your final guess?"


def questions_allowed(max_turns: int) -> int:
    """Questions before the final guess: every turn but the last."""
    return max(max_turns - 1, 0)


def rules_prompt(secret: Secret, level: Level, max_turns: int) -> str:
    """The first message of an episode."""
    theme = f" This object is related to {secret.theme}." if secret.theme else ""
    if max_turns > 1:
        limit = (
            f"You have {max_turns} turns: up to {questions_allowed(max_turns)} questions, "
            "then your final guess."
        )
        first = f"Turn 1 of {max_turns}: ask your first question, or guess."
    else:
        limit = "You have 1 turn: your guess."
        first = f"Turn 1 of 1. {OUT_OF_QUESTIONS}"
    return (
        f"You are playing 20 Questions ({level.capitalize()}).\n"
        "The gamemaster has chosen an object that can be one or more words."
        f"{theme} You have to guess this object by asking yes-or-no questions.\n"
        "The gamemaster answers each question with Yes, No or I don't know.\n"
        f"{limit} Ask one question per turn and do not wrap questions in square "
        "brackets.\n"
        "To make your guess, wrap it in square brackets, e.g. [plane], [diving bell]. A "
        "guess ends the game: you win if it is the object.\n"
        "As you play, the history of your questions and the gamemaster's answers will be "
        "displayed.\n"
        f"{first}"
    )


def turn_prompt(
    answer: str,
    history: Sequence[tuple[str, str]],
    turns_taken: int,
    max_turns: int,
    *,
    show_history: bool = True,
) -> str:
    """The message after a question: its answer, the history, and the turn count."""
    lines = [f"Gamemaster: {answer}"]
    if show_history and history:
        lines.append("History:")
        lines.extend(f"{i}. Q: {q} A: {a}" for i, (q, a) in enumerate(history, start=1))
    turn = turns_taken + 1
    if turn >= max_turns:
        lines.append(f"Turn {turn} of {max_turns}. {OUT_OF_QUESTIONS}")
    else:
        asked = len(history)
        left = questions_allowed(max_turns) - asked
        lines.append(
            f"Turn {turn} of {max_turns}: {asked} question{'s' if asked != 1 else ''} asked, "
            f"{left} left before your final guess."
        )
    return "\n".join(lines)
