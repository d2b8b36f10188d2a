"""The agentsgym plugin of agentsgym-twentyq (entry point ``twentyq``)."""

from __future__ import annotations

from agentsgym import RegisterAgent, RegisterEnv, hookimpl

ENV_CLASS = "agentsgym_twentyq.env:TwentyQuestionsEnv"
QUESTIONER = "twentyq/reference-questioner"


@hookimpl
def register_envs(register: RegisterEnv) -> None:
    register(
        "twentyq/TwentyQuestions-v0",
        ENV_CLASS,
        description="TextArena's 20 Questions (basic words); offline rules gamemaster by default",
        default_agent=QUESTIONER,
        hardcore=False,
    )
    register(
        "twentyq/TwentyQuestions-v0-hardcore",
        ENV_CLASS,
        description="TextArena's 20 Questions with its hardcore word list",
        default_agent=QUESTIONER,
        hardcore=True,
    )
    register(
        "twentyq/TwentyQuestions-v0-duel",
        "agentsgym_twentyq.duel:TwentyQuestionsDuelEnv",
        description="20 Questions for two agents: roles questioner and gamemaster (a model "
        "gamemaster rewarded for agreeing with the offline oracle)",
        default_agent="twentyq/duel-reference",
    )


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(
        QUESTIONER,
        "agentsgym_twentyq.questioner:ReferenceQuestioner",
        description="scripted TwentyQuestions player that halves the candidate words "
        "(options: natural_split, level)",
    )
    register(
        "twentyq/oracle-gamemaster",
        "agentsgym_twentyq.oracle_agent:OracleGamemasterAgent",
        description="scripted gamemaster role of TwentyQuestions-v0-duel: answers as the "
        "offline rules gamemaster",
    )
    register(
        "twentyq/duel-reference",
        "agentsgym_twentyq.oracle_agent:ReferenceDuelAgent",
        description="plays either role of TwentyQuestions-v0-duel: the reference questioner "
        "or the oracle gamemaster (option: natural_split)",
    )
