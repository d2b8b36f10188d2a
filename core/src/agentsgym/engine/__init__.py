"""The engine: episodes and trials of any :class:`PlayableEnv`, played on an event loop.

One object plays an episode turn by turn, whoever drives it: :class:`EpisodeSession`
(start, step, finish). The local engine drives it with an agent (:func:`aplay_episode`,
the trials of :func:`arun_trial`); the env server drives it for remote clients.
Satellite packages (the env server, executors) import from here, never from the modules.
"""

from agentsgym.engine.episode import EpisodeRun, aplay_episode, aplay_role_episodes
from agentsgym.engine.hook_results import as_messages, as_step_result, collect_terms
from agentsgym.engine.hook_runtime import EPISODE_HOOK_NAMES, HookRuntime, has_async_hooks
from agentsgym.engine.playable import PlayableEnv
from agentsgym.engine.session import (
    SERVER_PROMPT_MISMATCH_KEY,
    TOOL_CALLS_KEY,
    EpisodeSession,
    FinishedEpisode,
    TurnOutcome,
)
from agentsgym.engine.trials import (
    DEFAULT_MAX_CONCURRENCY,
    EpisodeCallback,
    TrialCallback,
    TrialJob,
    aplay_trial,
    arun_jobs,
    arun_trial,
    check_run_settings,
    make_group,
    make_groups,
    rollout_seed,
    run_trial,
)
from agentsgym.worker_pool import WorkerPool

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "EPISODE_HOOK_NAMES",
    "SERVER_PROMPT_MISMATCH_KEY",
    "TOOL_CALLS_KEY",
    "EpisodeCallback",
    "EpisodeRun",
    "EpisodeSession",
    "FinishedEpisode",
    "HookRuntime",
    "PlayableEnv",
    "TrialCallback",
    "TrialJob",
    "TurnOutcome",
    "WorkerPool",
    "aplay_episode",
    "aplay_role_episodes",
    "aplay_trial",
    "arun_jobs",
    "arun_trial",
    "as_messages",
    "as_step_result",
    "check_run_settings",
    "collect_terms",
    "has_async_hooks",
    "make_group",
    "make_groups",
    "rollout_seed",
    "run_trial",
]
