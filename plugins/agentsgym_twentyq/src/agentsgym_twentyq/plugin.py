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


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(
        QUESTIONER,
        "agentsgym_twentyq.questioner:ReferenceQuestioner",
        description="scripted TwentyQuestions player that halves the candidate words "
        "(options: natural_split, level)",
    )
