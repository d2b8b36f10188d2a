"""The runtime kit of agentsgym, for those who build servers, trainers and other
producers of episodes (env authors need only :mod:`agentsgym`).

It holds the episode protocol and its recorder (:class:`EpisodeSession`,
:class:`EpisodeRecorder`), the driving of agents (:func:`play_until`), how an env's hooks
are called (:class:`HookRuntime` on a :class:`WorkerPool`), and the pieces trainers and
clients of env servers share. Its names are listed once, in the ``TYPE_CHECKING``
block below; each is imported on first access.
"""

# ruff: noqa: F401 - the TYPE_CHECKING block lists the names this module hands out

from __future__ import annotations

from typing import TYPE_CHECKING

from agentsgym.lazy_api import public_names

__getattr__, __dir__, __all__ = public_names(
    __name__,
    __file__,
    guide="its names are listed in agentsgym.runtime.__all__; an env author's are in "
    "agentsgym.__all__ (docs/python-api.md says which API is which)",
)

# The imports below are this API's name list, kept once: type checkers and the import
# graph's tools read them, and public_names reads them to hand each name out.
if TYPE_CHECKING:
    from agentsgym.agents import AgentCaller
    from agentsgym.agents.openai_wire import parse_tool_arguments, policy_version_of
    from agentsgym.aio import run_sync
    from agentsgym.config import describe_validation_error
    from agentsgym.dataset_runner import arun_dataset, run_dataset
    from agentsgym.engine import (
        DEFAULT_MAX_CONCURRENCY,
        EpisodeRecorder,
        EpisodeSession,
        FinishedEpisode,
        HookRuntime,
        Players,
        RoleView,
        TrialJob,
        TurnOutcome,
        arun_trial,
        play_turn,
        play_until,
        rollout_seed,
    )
    from agentsgym.executors import AgentSpec
    from agentsgym.game_outcomes import win_draw_loss
    from agentsgym.grading import is_correct
    from agentsgym.hookspecs import (
        RegisterEnvSource,
        RegisterExecutor,
        RegisterModel,
        RegisterTrainer,
        hookspec,
    )
    from agentsgym.loop_pools import PerLoop
    from agentsgym.redaction import is_secret, redact, redact_argv, redact_text
    from agentsgym.registry import (
        ENV_ID_PATTERN,
        get_registry,
        make_trainer,
        model_folder,
        resolve,
        validate_env_id,
    )
    from agentsgym.retry import Attempts, RetryPolicy, retry_async, retry_sync
    from agentsgym.rewards import assign_token_rewards, discounted_returns
    from agentsgym.rows import DatasetRow, parse_rows, rows_to_dataset
    from agentsgym.specs import EnvSpec, ExecutorFlag
    from agentsgym.tokenization import AgentSpan, ChatTokenizer, reply_as_rendered
    from agentsgym.trainers import (
        RolloutSource,
        StepCallback,
        StepMetrics,
        TrainerAdapter,
        TrainResult,
    )
    from agentsgym.trajectory import UNKNOWN_VERSION, TokenSegment, records_to_dataset
    from agentsgym.worker_pool import WorkerPool
