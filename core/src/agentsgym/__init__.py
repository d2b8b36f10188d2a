"""agentsgym: multi-step text environments as training data for LLM RL.

This module is the public API that envs, agents, trainers and plugins build on
(docs/plugin-authors.md lists it with the other public modules: ``agentsgym.errors``,
``agentsgym.testing``, ``agentsgym.executors`` and the command-line kit
``agentsgym.cli``). Importing the package loads no plugin; each name is imported on
first access.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from agentsgym.hookspecs import hookimpl, hookspec

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "DEFAULT_TOKENIZER",
    "ENV_ID_PATTERN",
    "MAX_STEPS_PER_EPISODE",
    "TOOL_ERROR_PREFIX",
    "UNKNOWN_VERSION",
    "Agent",
    "AgentAction",
    "AgentSpan",
    "AgentSpec",
    "Attempts",
    "ChatTokenizer",
    "DatasetRow",
    "EnvConfig",
    "EnvSpec",
    "Episode",
    "EpisodeContext",
    "EpisodeSession",
    "ExecutorFlag",
    "FinishedEpisode",
    "FunctionAgent",
    "HookRuntime",
    "Message",
    "Messages",
    "MultistepEnv",
    "PerLoop",
    "RegisterAgent",
    "RegisterEnv",
    "RegisterEnvSource",
    "RegisterExecutor",
    "RegisterModel",
    "RegisterTrainer",
    "RetryPolicy",
    "RewardTerm",
    "Role",
    "RolloutSource",
    "ScriptedAgent",
    "StepCallback",
    "StepMetrics",
    "StepRecord",
    "StepResult",
    "TokenSegment",
    "TrainResult",
    "TrainerAdapter",
    "TrajectoryBatch",
    "TrajectoryGroup",
    "TrialJob",
    "TurnOutcome",
    "WorkerPool",
    "arun_dataset",
    "arun_trial",
    "assign_token_rewards",
    "call_agent",
    "check_env",
    "describe_validation_error",
    "discounted_returns",
    "episode_numpy_rng",
    "episode_random",
    "errors",
    "get_registry",
    "global_random",
    "hookimpl",
    "hookspec",
    "is_secret",
    "load_tokenizer",
    "make",
    "make_agent",
    "make_trainer",
    "model_folder",
    "parse_rows",
    "records_to_dataset",
    "redact",
    "redact_argv",
    "redact_text",
    "reply_as_rendered",
    "resolve",
    "retry_async",
    "retry_sync",
    "rollout_seed",
    "rows_to_dataset",
    "run_dataset",
    "run_sync",
    "task_seed",
    "validate_env_id",
]

_LAZY_MODULES = {
    "agentsgym.agents": ("Agent", "FunctionAgent", "ScriptedAgent", "call_agent"),
    "agentsgym.aio": ("run_sync",),
    "agentsgym.config": ("EnvConfig", "MAX_STEPS_PER_EPISODE", "describe_validation_error"),
    "agentsgym.dataset_runner": ("arun_dataset", "run_dataset"),
    "agentsgym.engine": (
        "DEFAULT_MAX_CONCURRENCY",
        "EpisodeSession",
        "FinishedEpisode",
        "HookRuntime",
        "TrialJob",
        "TurnOutcome",
        "arun_trial",
        "rollout_seed",
    ),
    "agentsgym.env": ("MultistepEnv",),
    "agentsgym.executors": ("AgentSpec",),
    "agentsgym.factory": ("DEFAULT_TOKENIZER", "load_tokenizer", "make"),
    "agentsgym.loop_pools": ("PerLoop",),
    "agentsgym.worker_pool": ("WorkerPool",),
    "agentsgym.hookspecs": (
        "RegisterAgent",
        "RegisterEnv",
        "RegisterEnvSource",
        "RegisterExecutor",
        "RegisterModel",
        "RegisterTrainer",
    ),
    "agentsgym.redaction": ("is_secret", "redact", "redact_argv", "redact_text"),
    "agentsgym.registry": (
        "ENV_ID_PATTERN",
        "get_registry",
        "make_agent",
        "make_trainer",
        "model_folder",
        "resolve",
        "validate_env_id",
    ),
    "agentsgym.randomness": ("episode_numpy_rng", "episode_random", "global_random", "task_seed"),
    "agentsgym.retry": ("Attempts", "RetryPolicy", "retry_async", "retry_sync"),
    "agentsgym.rewards": ("assign_token_rewards", "discounted_returns"),
    "agentsgym.rows": ("DatasetRow", "parse_rows", "rows_to_dataset"),
    "agentsgym.specs": ("EnvSpec", "ExecutorFlag"),
    "agentsgym.testing": ("check_env",),
    "agentsgym.tokenization": ("AgentSpan", "ChatTokenizer", "reply_as_rendered"),
    "agentsgym.trainers": (
        "RolloutSource",
        "StepCallback",
        "StepMetrics",
        "TrainResult",
        "TrainerAdapter",
    ),
    "agentsgym.trajectory": (
        "UNKNOWN_VERSION",
        "Episode",
        "StepRecord",
        "TokenSegment",
        "TrajectoryBatch",
        "TrajectoryGroup",
        "records_to_dataset",
    ),
    "agentsgym.types": (
        "TOOL_ERROR_PREFIX",
        "AgentAction",
        "EpisodeContext",
        "Message",
        "Messages",
        "RewardTerm",
        "Role",
        "StepResult",
    ),
}
_LAZY = {name: module for module, names in _LAZY_MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    if name == "errors":
        return import_module("agentsgym.errors")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(
            f"module 'agentsgym' has no attribute {name!r}; its public names are listed in "
            "agentsgym.__all__ (docs/plugin-authors.md says where plugins' names live)"
        )
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from agentsgym import errors
    from agentsgym.agents import Agent, FunctionAgent, ScriptedAgent, call_agent
    from agentsgym.aio import run_sync
    from agentsgym.config import MAX_STEPS_PER_EPISODE, EnvConfig, describe_validation_error
    from agentsgym.dataset_runner import arun_dataset, run_dataset
    from agentsgym.engine import (
        DEFAULT_MAX_CONCURRENCY,
        EpisodeSession,
        FinishedEpisode,
        HookRuntime,
        TrialJob,
        TurnOutcome,
        arun_trial,
        rollout_seed,
    )
    from agentsgym.env import MultistepEnv
    from agentsgym.executors import AgentSpec
    from agentsgym.factory import DEFAULT_TOKENIZER, load_tokenizer, make
    from agentsgym.hookspecs import (
        RegisterAgent,
        RegisterEnv,
        RegisterEnvSource,
        RegisterExecutor,
        RegisterModel,
        RegisterTrainer,
    )
    from agentsgym.loop_pools import PerLoop
    from agentsgym.randomness import episode_numpy_rng, episode_random, global_random, task_seed
    from agentsgym.redaction import is_secret, redact, redact_argv, redact_text
    from agentsgym.registry import (
        ENV_ID_PATTERN,
        get_registry,
        make_agent,
        make_trainer,
        model_folder,
        resolve,
        validate_env_id,
    )
    from agentsgym.retry import Attempts, RetryPolicy, retry_async, retry_sync
    from agentsgym.rewards import assign_token_rewards, discounted_returns
    from agentsgym.rows import DatasetRow, parse_rows, rows_to_dataset
    from agentsgym.specs import EnvSpec, ExecutorFlag
    from agentsgym.testing import check_env
    from agentsgym.tokenization import AgentSpan, ChatTokenizer, reply_as_rendered
    from agentsgym.trainers import (
        RolloutSource,
        StepCallback,
        StepMetrics,
        TrainerAdapter,
        TrainResult,
    )
    from agentsgym.trajectory import (
        Episode,
        StepRecord,
        TokenSegment,
        TrajectoryBatch,
        TrajectoryGroup,
        records_to_dataset,
    )
    from agentsgym.types import (
        TOOL_ERROR_PREFIX,
        AgentAction,
        EpisodeContext,
        Message,
        Messages,
        RewardTerm,
        Role,
        StepResult,
    )
    from agentsgym.worker_pool import WorkerPool
