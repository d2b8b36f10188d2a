"""agentsgym: multi-step text environments as training data for LLM RL.

Importing the package loads no plugin; the public API is imported on first access.
Names that moved to plugin distributions (``agentsgym.RemoteEnv``...) still import from
here when their package is installed (:mod:`agentsgym.satellites`).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from agentsgym.hookspecs import hookimpl, hookspec
from agentsgym.satellites import install_moved_module_finder, moved_name

install_moved_module_finder()

__all__ = [
    "DEFAULT_TOKENIZER", "Agent", "AgentAction", "AgentSpec", "EnvConfig", "EnvSpec", "Episode",
    "EpisodeContext", "FunctionAgent", "MultistepEnv", "RewardTerm", "ScriptedAgent", "StepResult",
    "TrajectoryBatch", "TrajectoryGroup", "arun_dataset", "errors", "hookimpl", "hookspec",
    "load_tokenizer", "make", "make_agent", "make_trainer", "parse_rows", "resolve",
    "rows_to_dataset", "run_dataset", "RetryPolicy", "retry_async", "retry_sync",
]  # fmt: skip

_LAZY_MODULES = {
    "agentsgym.agents": ("Agent", "FunctionAgent", "ScriptedAgent"),
    "agentsgym.config": ("EnvConfig",),
    "agentsgym.dataset_runner": ("arun_dataset", "run_dataset"),
    "agentsgym.env": ("MultistepEnv",),
    "agentsgym.executors": ("AgentSpec",),
    "agentsgym.factory": ("DEFAULT_TOKENIZER", "load_tokenizer", "make"),
    "agentsgym.registry": ("make_agent", "make_trainer", "resolve"),
    "agentsgym.retry": ("RetryPolicy", "retry_async", "retry_sync"),
    "agentsgym.rows": ("parse_rows", "rows_to_dataset"),
    "agentsgym.specs": ("EnvSpec",),
    "agentsgym.trajectory": ("Episode", "TrajectoryBatch", "TrajectoryGroup"),
    "agentsgym.types": ("AgentAction", "EpisodeContext", "RewardTerm", "StepResult"),
}
_LAZY = {name: module for module, names in _LAZY_MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    if name == "errors":
        return import_module("agentsgym.errors")
    module = _LAZY.get(name)
    if module is None:
        return moved_name(__name__, name)
    return getattr(import_module(module), name)


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
    from agentsgym.retry import RetryPolicy, retry_async, retry_sync
    from agentsgym.rows import parse_rows, rows_to_dataset
    from agentsgym.specs import EnvSpec
    from agentsgym.trajectory import Episode, TrajectoryBatch, TrajectoryGroup
    from agentsgym.types import AgentAction, EpisodeContext, RewardTerm, StepResult
