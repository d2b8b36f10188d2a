"""agentsgym: multi-step text environments as training data for LLM RL.

Importing the package loads no plugin: the registry loads on first use. The public
API is exported here; heavier pieces are imported lazily on attribute access. Names
that moved to plugin distributions (``agentsgym.RemoteEnv``, ``agentsgym.serve``...)
keep importing from here when their package is installed (see
:mod:`agentsgym.satellites`).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from agentsgym.hookspecs import hookimpl, hookspec
from agentsgym.satellites import install_moved_module_finder, moved_name

install_moved_module_finder()

__all__ = [
    "DEFAULT_TOKENIZER",
    "Agent",
    "AgentAction",
    "AgentSpec",
    "EnvConfig",
    "EnvSpec",
    "Episode",
    "EpisodeContext",
    "FunctionAgent",
    "MultistepEnv",
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
    "arun_dataset",
    "run_dataset",
]

_LAZY = {
    "Agent": "agentsgym.agents",
    "FunctionAgent": "agentsgym.agents",
    "ScriptedAgent": "agentsgym.agents",
    "AgentAction": "agentsgym.types",
    "AgentSpec": "agentsgym.executors",
    "RewardTerm": "agentsgym.types",
    "StepResult": "agentsgym.types",
    "EpisodeContext": "agentsgym.types",
    "EnvConfig": "agentsgym.config",
    "EnvSpec": "agentsgym.specs",
    "resolve": "agentsgym.registry",
    "make_agent": "agentsgym.registry",
    "make_trainer": "agentsgym.registry",
    "Episode": "agentsgym.trajectory",
    "TrajectoryBatch": "agentsgym.trajectory",
    "TrajectoryGroup": "agentsgym.trajectory",
    "MultistepEnv": "agentsgym.env",
    "make": "agentsgym.factory",
    "DEFAULT_TOKENIZER": "agentsgym.factory",
    "load_tokenizer": "agentsgym.factory",
    "parse_rows": "agentsgym.rows",
    "rows_to_dataset": "agentsgym.rows",
    "run_dataset": "agentsgym.dataset_runner",
    "arun_dataset": "agentsgym.dataset_runner",
    "errors": "agentsgym.errors",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        return moved_name(__name__, name)
    value = import_module(module)
    return value if name == "errors" else getattr(value, name)


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from agentsgym import errors
    from agentsgym.agents import Agent, FunctionAgent, ScriptedAgent
    from agentsgym.config import EnvConfig
    from agentsgym.dataset_runner import arun_dataset, run_dataset
    from agentsgym.env import MultistepEnv
    from agentsgym.executors import AgentSpec
    from agentsgym.factory import DEFAULT_TOKENIZER, load_tokenizer, make
    from agentsgym.registry import make_agent, make_trainer, resolve
    from agentsgym.rows import parse_rows, rows_to_dataset
    from agentsgym.specs import EnvSpec
    from agentsgym.trajectory import Episode, TrajectoryBatch, TrajectoryGroup
    from agentsgym.types import AgentAction, EpisodeContext, RewardTerm, StepResult
