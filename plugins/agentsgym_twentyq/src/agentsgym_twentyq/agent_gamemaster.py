"""A gamemaster played by any agentsgym agent, e.g. a model behind an OpenAI server.

The prompt is TextArena's gamemaster prompt (``TwentyQuestionsEnv.
get_gamemaster_response``): the context naming the target word, the Q/A history, the
question and the options. Two ways a gamemaster can let the player down, treated
differently because only one of them makes the episode's reward wrong:

* **It answered, but not clearly** ("Yes and no", "banana"): the reply is read as
  "I don't know" and the step info says ``gamemaster_fallback``. That is this
  gamemaster's answer, as a model's wrong answer would be; the game played is the
  game against this gamemaster, and its reward stands.
* **It could not answer** (its agent raised: the server is unreachable, timed out
  after the agent's own retries, refused the request, or the agent is broken): a
  :class:`~agentsgym_twentyq.errors.GamemasterError` fails the episode. Going on with
  an "I don't know" the gamemaster never gave would record a reward that says more
  about the network than about the player, and a dead server would turn a whole run
  into confident zeros.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence
from typing import Any

from agentsgym import call_agent
from agentsgym_twentyq.errors import GamemasterError
from agentsgym_twentyq.gamemaster import ANSWERS, DONT_KNOW, NO, YES, GamemasterReply
from agentsgym_twentyq.parsing import strip_thinking
from agentsgym_twentyq.words import Secret

logger = logging.getLogger(__name__)

_DONT_KNOW = re.compile(
    r"\bi\s+(?:don'?t|do\s+not)\s+know\b|\bunknown\b|\bnot\s+sure\b|\bunsure\b"
    r"|\bcan(?:not|'t)\s+(?:say|tell|know)\b"
)
_YES = re.compile(r"\byes\b")
_NO = re.compile(r"\bno\b")
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
LOGGED_FALLBACKS = 5


def read_answer(reply: str) -> str | None:
    """The answer a reply clearly gives, or ``None`` when it gives none or several.

    ``"No, it is not."`` -> No, ``"**Yes**"`` -> Yes, ``"I do not know"`` -> I don't
    know, ``"Yes and no"`` / ``"banana"`` -> None.
    """
    text = strip_thinking(reply).translate(_QUOTES).lower()
    found: set[str] = set()
    if _DONT_KNOW.search(text):
        found.add(DONT_KNOW)
        text = _DONT_KNOW.sub(" ", text)
    if _YES.search(text):
        found.add(YES)
    if _NO.search(text):
        found.add(NO)
    return found.pop() if len(found) == 1 else None


def gamemaster_messages(
    question: str, secret: Secret, history: Sequence[tuple[str, str]]
) -> list[dict[str, str]]:
    """TextArena's gamemaster prompt, as a system and a user message."""
    category = f" It is a {secret.category}." if secret.category else ""
    context = (
        "You are the gamemaster for the game of '20 Questions'.\n"
        "You will provide responses to the players' questions that guides them into "
        f"guessing the target word: {secret.word}\n"
        f"The target word is '{secret.word}'.{category} Answer every question truthfully "
        "about that word with exactly one of: Yes, No, I don't know. Never reveal the word."
    )
    options = ", ".join(f"'{option}'" for option in ANSWERS)
    past = "\n".join(f"Q: {q}\nA: {a}" for q, a in history)
    prompt = (
        f"{past}\n\nQ: {question}\nOptions: {options}\n\n"
        "Please respond with the most appropriate option."
    )
    return [{"role": "system", "content": context}, {"role": "user", "content": prompt.lstrip()}]


class AgentGamemaster:
    """Asks an agent (anything with ``get_action(messages, state)``) to answer.

    :param name: how messages name the gamemaster (the agent's registered name).
    :param check: what a user should check when the agent cannot answer, e.g. the
        ``gamemaster_options`` it was built with; shown first in the episode's error.
    """

    def __init__(self, agent: Any, name: str | None = None, *, check: str | None = None) -> None:
        if not callable(getattr(agent, "get_action", None)):
            raise TypeError(f"a gamemaster agent needs get_action(messages, state); got {agent!r}")
        self.agent = agent
        self.name = name or type(agent).__name__
        self.check = check or "the gamemaster agent"
        self._lock = threading.Lock()
        self.fallbacks = 0

    def answer(
        self, question: str, secret: Secret, history: Sequence[tuple[str, str]] = ()
    ) -> GamemasterReply:
        """The agent's answer; "I don't know" (a fallback) when its reply is unclear.

        :raises GamemasterError: the agent raised, so there is no answer at all.
        """
        messages = gamemaster_messages(question, secret, history)
        try:
            action, _ = call_agent(self.agent, messages, None, None)  # type: ignore[arg-type]
        except Exception as exc:  # any failure: the question got no answer
            raise self._unanswered(question, exc) from exc
        answer = read_answer(action.text)
        if answer is None:
            return self._fallback(
                "the reply is not clearly one of 'Yes', 'No', \"I don't know\"", action.text
            )
        return GamemasterReply(answer, raw=action.text)

    def _unanswered(self, question: str, exc: Exception) -> GamemasterError:
        # What to check comes first: run summaries show only an error's first 300
        # characters, and the agent's own message can be long.
        error = GamemasterError(
            f"gamemaster {self.name!r} could not answer (check {self.check}): "
            f"{type(exc).__name__}: {str(exc).rstrip('.')}. The episode fails rather than "
            "go on with an answer the gamemaster never gave."
        )
        logger.debug("%s (question %r)", error, question[:200])
        return error

    def _fallback(self, error: str, raw: str | None) -> GamemasterReply:
        with self._lock:
            self.fallbacks += 1
            count = self.fallbacks
        level = logging.WARNING if count <= LOGGED_FALLBACKS else logging.DEBUG
        logger.log(
            level,
            'gamemaster %s gave no clear answer (%s; reply %r); answering "I don\'t know"%s',
            self.name,
            error,
            (raw or "")[:200],
            " (further ones are logged at DEBUG)" if count == LOGGED_FALLBACKS else "",
        )
        return GamemasterReply(DONT_KNOW, fallback=True, error=error, raw=raw)
