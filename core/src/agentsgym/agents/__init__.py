"""Agents: the Agent protocol, how the runner calls agents, and the built-in agents.

* :class:`Agent` (:mod:`.base`): ``get_action(messages, agent_state)``, plain or async;
* :class:`AgentCaller`: calls any agent the way its ``get_action`` wants;
* :class:`ScriptedAgent`, :class:`FunctionAgent` (:mod:`.scripted`): fixed replies or a
  function, for tests, demos and baselines;
* :class:`OpenAIAgent` (:mod:`.openai_agent`): an OpenAI-compatible server such as
  vLLM, imported on first access.

Agents that need torch (a local transformers model) ship in plugin distributions.
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
