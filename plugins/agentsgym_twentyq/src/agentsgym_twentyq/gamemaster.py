"""The gamemaster protocol, its answers, and the offline rules gamemaster.

TextArena's TwentyQuestions builds an OpenRouter model as gamemaster in its
constructor, so it cannot run without an API key and network. Here the gamemaster is
pluggable: :class:`RulesGamemaster` (the default) decides every question it can from
the word and its category alone, and :mod:`agentsgym_twentyq.agent_gamemaster` lets
any agentsgym agent (a model behind an OpenAI-compatible server) answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agentsgym_twentyq.questions import parse_question
from agentsgym_twentyq.words import Secret

YES, NO, DONT_KNOW = "Yes", "No", "I don't know"
ANSWERS = (YES, NO, DONT_KNOW)  # TextArena's gamemaster_options, in its order


@dataclass(frozen=True)
class GamemasterReply:
    """A gamemaster's answer, always one of :data:`ANSWERS`.

    ``fallback`` is set when the gamemaster replied with something that is not clearly
    one of the answers and "I don't know" was used instead; ``error`` says why, ``raw``
    keeps the raw reply for the step info. (A gamemaster that could not reply at all
    raises :class:`~agentsgym_twentyq.errors.GamemasterError` instead.)
    """

    answer: str
    fallback: bool = False
    error: str | None = None
    raw: str | None = None
    kind: str | None = None

    def info(self) -> dict[str, object]:
        """JSON-serialisable diagnostics for the step info. The gamemaster's answer is
        ``gamemaster_answer``: ``answer`` is what the acting player answered (eval's
        cons@k vote), which a question is not."""
        info: dict[str, object] = {
            "gamemaster_answer": self.answer,
            "gamemaster_fallback": self.fallback,
        }
        if self.kind is not None:
            info["question_kind"] = self.kind
        if self.error is not None:
            info["gamemaster_error"] = self.error
        if self.raw is not None:
            info["gamemaster_raw"] = self.raw[:500]
        return info


@runtime_checkable
class Gamemaster(Protocol):
    """Answers one question about the secret word.

    ``history`` holds the earlier ``(question, answer)`` pairs of the episode. It is
    called from the runner's worker threads, concurrently for different episodes, so
    an implementation must be thread-safe. When it cannot answer at all (its model is
    unreachable), it raises :class:`~agentsgym_twentyq.errors.GamemasterError`, which
    fails the episode; any other exception, or a reply that is not one of
    :data:`ANSWERS`, fails it the same way.
    """

    def answer(
        self, question: str, secret: Secret, history: Sequence[tuple[str, str]]
    ) -> GamemasterReply: ...


class RulesGamemaster:
    """Offline and deterministic: answers what the word's spelling and category decide.

    See :mod:`agentsgym_twentyq.questions` for the questions it understands; it says
    "I don't know" to everything else. It never falls back: "I don't know" is its
    honest answer to a question it cannot decide.
    """

    name = "rules"

    def answer(
        self, question: str, secret: Secret, history: Sequence[tuple[str, str]] = ()
    ) -> GamemasterReply:
        query = parse_question(question)
        if query is None:
            return GamemasterReply(DONT_KNOW)
        value = query.evaluate(secret)
        if value is None:
            return GamemasterReply(DONT_KNOW, kind=query.kind)
        return GamemasterReply(YES if value else NO, kind=query.kind)
