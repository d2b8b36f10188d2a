"""The engine: episodes and trials of any :class:`PlayableEnv`, played on an event loop.

One object records an episode, whoever produces it: :class:`EpisodeRecorder` (views per
role, segments, token sources, policy versions, the closing record). One protocol plays
it turn by turn through the env's hooks, on that recorder: :class:`EpisodeSession`
(start, step, finish). Agents drive it through :func:`play_until` (the local engine's
:func:`aplay_episode` and the trials of :func:`arun_trial`; the env server's agents of
the roles its clients do not play, :func:`play_turn`); the env server drives it for
remote clients.
"""

from agentsgym.engine.episode import EpisodeRun, aplay_episode, aplay_role_episodes
from agentsgym.engine.hook_results import as_messages, as_step_result, collect_terms
from agentsgym.engine.hook_runtime import EPISODE_HOOK_NAMES, HookRuntime, has_async_hooks
from agentsgym.engine.outcomes import FinishedEpisode, TurnOutcome
from agentsgym.engine.play import Players, play_turn, play_until
from agentsgym.engine.playable import PlayableEnv
from agentsgym.engine.recorder import SERVER_PROMPT_MISMATCH_KEY, EpisodeRecorder, RoleView
from agentsgym.engine.session import EpisodeSession
from agentsgym.engine.tool_turns import TOOL_CALLS_KEY, toolbox_now
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
    "EpisodeRecorder",
    "EpisodeRun",
    "EpisodeSession",
    "FinishedEpisode",
    "HookRuntime",
    "PlayableEnv",
    "Players",
    "RoleView",
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
    "play_turn",
    "play_until",
    "rollout_seed",
    "run_trial",
    "toolbox_now",
]
