"""agentsgym: multi-step text environments as training data for LLM RL.

Importing the package loads no plugin: the registry loads on first use. The public
API is exported here; heavier pieces are imported lazily on attribute access.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from agentsgym.hookspecs import hookimpl, hookspec

__all__ = [
    "Agent",
    "AgentAction",
    "AgentGymEnv",
    "AgentSpec",
    "EnvConfig",
    "EnvSpec",
    "Episode",
    "EpisodeContext",
    "FunctionAgent",
    "MultistepEnv",
    "RemoteEnv",
    "RewardTerm",
    "ScriptedAgent",
    "StepResult",
    "TrajectoryBatch",
    "TrajectoryGroup",
    "errors",
    "hookimpl",
    "hookspec",
    "load_tokenizer",
    "make",
    "make_agent",
    "make_trainer",
    "parse_rows",
    "resolve",
    "rows_to_dataset",
    "run_dataset",
]

_LAZY = {
    "Agent": "agentsgym.agents",
    "FunctionAgent": "agentsgym.agents",
    "ScriptedAgent": "agentsgym.agents",
    "AgentAction": "agentsgym.types",
    "AgentSpec": "agentsgym.agents.spec",
    "RewardTerm": "agentsgym.types",
    "StepResult": "agentsgym.types",
    "EpisodeContext": "agentsgym.types",
    "EnvConfig": "agentsgym.config",
    "EnvSpec": "agentsgym.registry",
    "resolve": "agentsgym.registry",
    "make_agent": "agentsgym.registry",
    "make_trainer": "agentsgym.registry",
    "Episode": "agentsgym.trajectory",
    "TrajectoryBatch": "agentsgym.trajectory",
    "TrajectoryGroup": "agentsgym.trajectory",
    "MultistepEnv": "agentsgym.env",
    "make": "agentsgym.factory",
    "load_tokenizer": "agentsgym.factory",
    "parse_rows": "agentsgym.rows",
    "rows_to_dataset": "agentsgym.rows",
    "run_dataset": "agentsgym.dataset_runner",
    "errors": "agentsgym.errors",
    "RemoteEnv": "agentsgym.serve.remote_env",
    "AgentGymEnv": "agentsgym.serve.agentgym_env",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentsgym' has no attribute {name!r}")
    value = import_module(module)
    return value if name == "errors" else getattr(value, name)


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from agentsgym import errors
    from agentsgym.agents import Agent, FunctionAgent, ScriptedAgent
    from agentsgym.agents.spec import AgentSpec
    from agentsgym.config import EnvConfig
    from agentsgym.dataset_runner import run_dataset
    from agentsgym.env import MultistepEnv
    from agentsgym.factory import load_tokenizer, make
    from agentsgym.registry import EnvSpec, make_agent, make_trainer, resolve
    from agentsgym.rows import parse_rows, rows_to_dataset
    from agentsgym.serve.agentgym_env import AgentGymEnv
    from agentsgym.serve.remote_env import RemoteEnv
    from agentsgym.trajectory import Episode, TrajectoryBatch, TrajectoryGroup
    from agentsgym.types import AgentAction, EpisodeContext, RewardTerm, StepResult
