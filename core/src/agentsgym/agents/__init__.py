"""Agents: the Agent protocol, how the runner calls agents, and the built-in agents.

:class:`OpenAIAgent` (an OpenAI-compatible server such as vLLM) is imported on first
access; agents that need torch ship in plugin distributions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentsgym.agents.base import (
    REPAIRED_SURROGATES_KEY,
    Agent,
    AgentCaller,
    acall_agent,
    as_action,
    call_agent,
    follow_concurrency,
)
from agentsgym.agents.scripted import FunctionAgent, ScriptedAgent

__all__ = [
    "REPAIRED_SURROGATES_KEY",
    "Agent",
    "AgentCaller",
    "FunctionAgent",
    "OpenAIAgent",
    "ScriptedAgent",
    "acall_agent",
    "as_action",
    "call_agent",
    "follow_concurrency",
]


def __getattr__(name: str) -> Any:
    if name == "OpenAIAgent":
        from agentsgym.agents.openai_agent import OpenAIAgent

        return OpenAIAgent
    raise AttributeError(f"module 'agentsgym.agents' has no attribute {name!r}")


if TYPE_CHECKING:
    from agentsgym.agents.openai_agent import OpenAIAgent
