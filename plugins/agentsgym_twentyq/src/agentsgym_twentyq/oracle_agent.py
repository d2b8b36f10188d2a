"""``twentyq/oracle-gamemaster``: a scripted player of the gamemaster role of
``twentyq/TwentyQuestions-v0-duel`` that answers as the offline rules gamemaster does
(its answers agree with the oracle by construction: a baseline, and a frozen opponent
for a questioner)."""

from __future__ import annotations

import re
from typing import Any

from agentsgym_twentyq.gamemaster import RulesGamemaster
from agentsgym_twentyq.words import Secret

WORD = re.compile(r"The target word is '([^']+)'\.(?: It is a (place|person|thing)\.)?")
QUESTION = re.compile(r"Q: (.*)\nOptions:", re.DOTALL)


class OracleGamemasterAgent:
    """Reads the word from its first prompt and each question from the latest one."""

    run_inline = True

    def __init__(self) -> None:
        self.rules = RulesGamemaster()

    def get_action(self, messages: list[dict[str, Any]], agent_state: Any) -> tuple[str, Any]:
        found = WORD.search(messages[0].get("content", ""))
        asked = QUESTION.search(messages[-1].get("content", ""))
        if found is None or asked is None:
            raise ValueError(
                "twentyq/oracle-gamemaster plays the gamemaster role of "
                "twentyq/TwentyQuestions-v0-duel; this conversation is not one"
            )
        secret = Secret(found.group(1), found.group(2))  # type: ignore[arg-type]
        question = asked.group(1).strip().splitlines()[-1]
        return self.rules.answer(question, secret).answer, agent_state


class ReferenceDuelAgent:
    """Plays either role of the duel: the oracle's answers in the gamemaster's seat (its
    conversation opens with the gamemaster prompt), the reference questioner's
    questions in the other. The duel's default agent (``twentyq/duel-reference``)."""

    run_inline = True

    def __init__(self, natural_split: float = 0.4) -> None:
        from agentsgym_twentyq.questioner import ReferenceQuestioner

        self.questioner = ReferenceQuestioner(natural_split=natural_split)
        self.gamemaster = OracleGamemasterAgent()

    def get_action(self, messages: list[dict[str, Any]], agent_state: Any) -> tuple[str, Any]:
        first = messages[0].get("content", "") if messages else ""
        if messages[0].get("role") == "system" and WORD.search(first):
            return self.gamemaster.get_action(messages, agent_state)
        return self.questioner.get_action(messages, agent_state)
