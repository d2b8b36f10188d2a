"""The core's built-in plugin: the example env and the generic agents."""

from __future__ import annotations

from agentsgym.hookspecs import hookimpl
from agentsgym.registry import RegisterAgent, RegisterEnv


@hookimpl
def register_envs(register: RegisterEnv) -> None:
    register(
        "agentsgym/GuessTheNumber-v0",
        "agentsgym.builtin.guess_number:GuessTheNumberEnv",
        description="Find a hidden integer in [1, 100] from higher/lower hints (example env)",
        default_agent="agentsgym/bisect",
    )


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(
        "scripted",
        "agentsgym.agents.scripted:ScriptedAgent",
        description="replies with a fixed list of messages (option: replies=[...])",
    )
    register(
        "agentsgym/bisect",
        "agentsgym.builtin.guess_number:BisectAgent",
        description="plays GuessTheNumber by bisection",
    )
