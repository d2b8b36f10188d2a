"""Agents: the Agent protocol, scripted agents, and the model-backed agents.

``TransformersAgent`` (a local causal LM, token-in/token-out) and ``OpenAIAgent`` (an
OpenAI-compatible server such as vLLM) are imported on first access, and import
torch / the openai client only when they are built.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from agentsgym.agents.base import Agent, acall_agent, call_agent
from agentsgym.agents.scripted import FunctionAgent, ScriptedAgent

__all__ = [
    "Agent",
    "FunctionAgent",
    "OpenAIAgent",
    "ScriptedAgent",
    "TransformersAgent",
    "acall_agent",
    "call_agent",
]

_LAZY = {
    "OpenAIAgent": "agentsgym.agents.openai_agent",
    "TransformersAgent": "agentsgym.agents.transformers_agent",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentsgym.agents' has no attribute {name!r}")
    return getattr(import_module(module), name)


if TYPE_CHECKING:
    from agentsgym.agents.openai_agent import OpenAIAgent
    from agentsgym.agents.transformers_agent import TransformersAgent
