"""The engine: episodes and trials played on an event loop.

* :mod:`.playable`: :class:`PlayableEnv`, what the engine needs of an env
  (:class:`agentsgym.MultistepEnv` implements it; the engine never imports it);
* :mod:`.hook_runtime`, :mod:`.hook_calls`: where and how an env's hooks run
  (worker threads of :mod:`agentsgym.worker_pool`, the loop, budgets; pluggy);
* :mod:`.hook_results`: what hooks return, checked;
* :mod:`.episode`: one episode (hooks, agent, token stream, rewards);
* :mod:`.trials`: trials of many tasks at once, and their padded groups.

Satellite packages (the env server, executors) import from here, never from the
modules.
"""

from agentsgym.engine.episode import EpisodeRun, aplay_episode
from agentsgym.engine.hook_results import as_messages, as_step_result, collect_terms
from agentsgym.engine.hook_runtime import EPISODE_HOOK_NAMES, HookRuntime, has_async_hooks
from agentsgym.engine.playable import PlayableEnv
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
    rollout_seed,
    run_trial,
)
from agentsgym.worker_pool import WorkerPool

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "EPISODE_HOOK_NAMES",
    "EpisodeCallback",
    "EpisodeRun",
    "HookRuntime",
    "PlayableEnv",
    "TrialCallback",
    "TrialJob",
    "WorkerPool",
    "aplay_episode",
    "aplay_trial",
    "arun_jobs",
    "arun_trial",
    "as_messages",
    "as_step_result",
    "check_run_settings",
    "collect_terms",
    "has_async_hooks",
    "make_group",
    "rollout_seed",
    "run_trial",
]
