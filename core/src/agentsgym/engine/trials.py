"""The runner: trials of episodes as asyncio tasks, and the padded groups they make.

A *trial* is one rollout of one task: ``episodes_per_trial`` episodes played in
sequence by one agent, keeping its state (the last one is scored). In an env with roles
each episode is one record per role (``episode.role``), and a task's rollouts make one
group per trainable role.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentsgym.agents import AgentCaller, follow_concurrency
from agentsgym.aio import sync_twin
from agentsgym.engine.episode import aplay_role_episodes, own_episodes
from agentsgym.engine.hook_runtime import HookRuntime
from agentsgym.engine.play import callers_by_role
from agentsgym.errors import RunSettingsError
from agentsgym.trajectory import Episode, TrajectoryBatch, TrajectoryGroup, zero_rewards
from agentsgym.types import EpisodeContext
from agentsgym.worker_pool import WorkerPool

if TYPE_CHECKING:
    from agentsgym.agents import Agent
    from agentsgym.engine.playable import PlayableEnv

logger = logging.getLogger(__name__)

DEFAULT_MAX_CONCURRENCY = 64
"""Trials in flight at once. A model server batches the requests it has, so it needs
many episodes waiting on it: 64 keeps a small server fed; raise it to the server's
batch capacity (vLLM's ``--max-num-seqs``) for a large one."""

EXTRA_WORKER_THREADS = 4
EpisodeCallback = Callable[[Episode], None]
TrialCallback = Callable[["TrialJob", list[Episode]], None]


@dataclass(frozen=True)
class TrialJob:
    """One trial to play: a task of an env, which rollout of it this is, and who plays
    (``agent``: ``None`` for the run's agent, or the agent of a mixed dataset row's env;
    in an env with roles, either may be a dict of agents by role)."""

    env: PlayableEnv
    task_data: dict[str, Any]
    task_index: int
    rollout_index: int
    agent: Any = None

    @property
    def key(self) -> tuple[int, int]:
        return self.task_index, self.rollout_index


def rollout_seed(run_seed: int, env_id: str, task_data: dict[str, Any], rollout_index: int) -> int:
    """The per-rollout seed of EpisodeContext: stable across runs and processes."""
    blob = json.dumps([run_seed, env_id, task_data, rollout_index], sort_keys=True, default=str)
    return int.from_bytes(hashlib.blake2b(blob.encode(), digest_size=8).digest(), "big") >> 1


def check_run_settings(num_rollouts: int, max_concurrency: int) -> None:
    for name, value in (("num_rollouts", num_rollouts), ("max_concurrency", max_concurrency)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise RunSettingsError(f"{name} must be an integer of at least 1, got {value!r}")


async def aplay_trial(
    job: TrialJob,
    caller: AgentCaller | dict[str, AgentCaller] | None,
    runtime: HookRuntime,
    *,
    seed: int = 0,
    on_episode: EpisodeCallback | None = None,
) -> list[Episode]:
    """Play the ``episodes_per_trial`` episodes of one trial; the last is scored. With
    roles, each episode adds one record per role, in the env's role order."""
    env = job.env
    session_id = env.new_session(job.task_data)
    episode_seed = rollout_seed(seed, env.env_id, job.task_data, job.rollout_index)
    agent_state: Any = None
    episodes: list[Episode] = []
    try:
        for index in range(env.config.episodes_per_trial):
            context = EpisodeContext(
                session_id, env.env_id, job.task_index, job.rollout_index, index, episode_seed
            )
            played = await aplay_role_episodes(
                env, session_id, caller, agent_state, context=context, runtime=runtime
            )
            for episode in played:
                episode.task_index, episode.rollout_index = job.task_index, job.rollout_index
                episode.episode_index = index
                if index < env.config.free_shots:  # a leading episode that earns no reward
                    episode.free_shot = True
                    episode.metrics["raw_final_reward"] = episode.final_reward
                    episode.final_reward = 0.0
                    zero_rewards(episode)
                episodes.append(episode)
                if on_episode is not None:
                    on_episode(episode)
            if not all(episode.ok for episode in played):
                break
            if played[0].role is None:
                agent_state = played[0].agent_state
            else:
                agent_state = {episode.role: episode.agent_state for episode in played}
    finally:
        env.sessions.pop(session_id, None)
    return episodes


async def arun_jobs(
    jobs: Sequence[TrialJob],
    agent: Agent | None,
    *,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    seed: int = 0,
    on_episode: EpisodeCallback | None = None,
    on_trial: TrialCallback | None = None,
) -> dict[tuple[int, int], list[Episode]]:
    """Play every trial, up to ``max_concurrency`` at once; episodes by job key.

    A job plays with its own ``agent`` if it has one. Only an env that plays its own
    episodes (``aplay_own_episode``) may have no agent: it names its model itself (a
    harness env's ``backend_url``). The callbacks run on the loop's thread after every
    episode / trial; an exception from one stops the run.
    """
    check_run_settings(1, max_concurrency)
    results: dict[tuple[int, int], list[Episode]] = {}
    if not jobs:
        return results
    callers: dict[int, AgentCaller] = {}
    for job in jobs:
        player = job.agent if job.agent is not None else agent
        if player is None and own_episodes(job.env) is not None:
            continue
        if player is None:
            raise RunSettingsError(
                f"trial {job.key} of {job.env.env_id} has no agent: give one for the run or "
                "for its env"
            )
        callers_by_role(player, job.env.role_names, job.env)
        for one in player.values() if isinstance(player, dict) else (player,):
            if id(one) not in callers:
                callers[id(one)] = AgentCaller(one)
                follow_concurrency(one, max_concurrency)

    def caller_of(player: Any) -> AgentCaller | dict[str, AgentCaller] | None:
        if player is None:
            return None
        if isinstance(player, dict):
            return {role: callers[id(one)] for role, one in player.items()}
        return callers[id(player)]

    pool = WorkerPool(max_concurrency + EXTRA_WORKER_THREADS)
    envs = {id(job.env): job.env for job in jobs}
    runtimes = {key: HookRuntime(env, pool) for key, env in envs.items()}
    pending = iter(jobs)

    async def worker() -> None:
        for job in pending:
            player = job.agent if job.agent is not None else agent
            episodes = await aplay_trial(
                job, caller_of(player), runtimes[id(job.env)], seed=seed, on_episode=on_episode
            )
            results[job.key] = episodes
            if on_trial is not None:
                on_trial(job, episodes)
            # A trial of inline agents and plain hooks never suspends: without this a
            # cancel (Ctrl-C, a failed sibling) would wait for every job left.
            await asyncio.sleep(0)

    workers = [asyncio.ensure_future(worker()) for _ in range(min(max_concurrency, len(jobs)))]
    try:
        await asyncio.gather(*workers)
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        # Threads still running an abandoned hook keep going; nothing waits for them.
        pool.close()
    return results


def make_group(
    env: PlayableEnv,
    task_index: int,
    task_data: dict[str, Any],
    trials: list[list[Episode]],
    role: str | None = None,
) -> TrajectoryGroup:
    """The padded group of one task's trials (with ``role``: that role's episodes)."""
    chat = env.chat
    if role is not None:
        trials = [[e for e in trial if e.role == role] for trial in trials]
        chat = env.role_chats.get(role, chat)
    return TrajectoryGroup(
        task_index=task_index,
        task_data=dict(task_data),
        env_id=env.env_id,
        trials=trials,
        pad_token_id=chat.pad_token_id if chat is not None else None,
        tokenized=chat is not None,
        role=role,
    )


def make_groups(
    env: PlayableEnv,
    task_index: int,
    task_data: dict[str, Any],
    trials: list[list[Episode]],
    *,
    roles: Sequence[str] | None = None,
) -> list[TrajectoryGroup]:
    """The groups of one task's trials: one, or one per role of an env with roles
    (``roles``: which ones, by default those the env trains)."""
    if not env.roles:
        return [make_group(env, task_index, task_data, trials)]
    chosen = env.trainable_roles if roles is None else roles
    return [make_group(env, task_index, task_data, trials, role) for role in chosen]


async def arun_trial(
    env: PlayableEnv,
    task_data_list: list[dict[str, Any]],
    agent: Agent | dict[str, Agent] | None,
    num_rollouts: int = 1,
    *,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    seed: int = 0,
    on_episode: EpisodeCallback | None = None,
    on_trial: TrialCallback | None = None,
) -> TrajectoryBatch:
    """Play ``num_rollouts`` trials of every task, concurrently; one group per task (per
    task and trainable role in an env with roles). ``agent``: one agent (in an env with
    roles, it plays every role: self-play) or a dict of agents by role; ``None`` only for
    an env that plays its own episodes with a model of its own."""
    check_run_settings(num_rollouts, max_concurrency)
    jobs = [
        TrialJob(env, task_data, task_index, rollout_index)
        for task_index, task_data in enumerate(task_data_list)
        for rollout_index in range(num_rollouts)
    ]
    results = await arun_jobs(
        jobs,
        agent,
        max_concurrency=max_concurrency,
        seed=seed,
        on_episode=on_episode,
        on_trial=on_trial,
    )
    episodes = [e for trial in results.values() for e in trial]
    if failed := [e for e in episodes if not e.ok]:
        logger.warning(
            "%d of %d episodes of %s failed (kept with their errors in batch.failed); first: %s",
            len(failed),
            len(episodes),
            env.env_id,
            failed[0].error,
        )
    groups = [
        group
        for index, task_data in enumerate(task_data_list)
        for group in make_groups(
            env, index, task_data, [results[(index, r)] for r in range(num_rollouts)]
        )
    ]
    return TrajectoryBatch(groups)


run_trial = sync_twin(arun_trial)
