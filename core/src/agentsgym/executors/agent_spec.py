"""AgentSpec: how to build an agent, for code that builds it somewhere else.

A Ray worker (or any other process) must build its own agent: a live agent holds
clients, threads or a model that cannot be pickled and shipped. An AgentSpec is the
recipe instead: a registered agent name (or a picklable factory) and its options.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentsgym.errors import AgentError
from agentsgym.registry import make_agent


@dataclass(frozen=True)
class AgentSpec:
    """A registered agent name or a picklable factory, and the options to call it with.

    ``AgentSpec("openai", {"base_url": "http://gpu-node:8000/v1", "api": "completions"})``
    """

    factory: str | Callable[..., Any]
    options: Mapping[str, Any] = field(default_factory=dict)

    def build(self) -> Any:
        if isinstance(self.factory, str):
            return make_agent(self.factory, **dict(self.options))
        return self.factory(**dict(self.options))


def as_agent_spec(agent: Any, options: Mapping[str, Any] | None = None) -> AgentSpec:
    """An AgentSpec from a spec, a registered name, or a factory; an agent object is refused."""
    if isinstance(agent, AgentSpec):
        return agent
    if isinstance(agent, str) or (callable(agent) and not hasattr(agent, "get_action")):
        return AgentSpec(agent, dict(options or {}))
    raise AgentError(
        f"this executor builds the agent in each worker, so it needs a recipe, not the agent "
        f"object {type(agent).__name__} (its clients and threads cannot be shipped): pass "
        "agent='<registered name>' (with agent_options=...) or "
        "agentsgym.AgentSpec(factory, {option: value})"
    )


def built_agent(agent: Any) -> Any:
    """An agent object from an agent, a registered name or an AgentSpec (None stays None)."""
    if isinstance(agent, (AgentSpec, str)):
        return as_agent_spec(agent).build()
    return agent
