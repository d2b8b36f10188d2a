"""The Ray executor: trials spread over Ray actors, results streamed back.

Each actor (:class:`RolloutWorker`) is a process with its own event loop, env cache,
tokenizer and agent, built in the worker from an :class:`~agentsgym.AgentSpec` (a live
agent is never pickled). The driver sends work one *task* at a time (all its
rollouts, so a group comes back whole), keeps every actor busy with a few tasks in
flight, and as each task's trials come back calls ``on_episode`` / ``on_trial`` in
the driver process, so streaming writers and progress bars work as with the local
executor.

A worker that dies (killed, out of memory, its node lost) is reported; its unfinished
tasks are retried on a fresh actor up to ``max_task_retries`` times, then recorded as
failed episodes with the error. Nothing is silently lost.

Ray is an extra: ``pip install 'agentsgym[ray]'``.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentsgym.agents.spec import AgentSpec
from agentsgym.errors import AgentsGymError
from agentsgym.rows import DatasetRow
from agentsgym.runner import EpisodeCallback, TrialCallback, TrialJob
from agentsgym.trajectory import Episode

logger = logging.getLogger(__name__)

DEFAULT_TASKS_IN_FLIGHT = 4
MAX_TASK_RETRIES = 2

# Actors outlive a call: starting one (a process that imports agentsgym, loads the
# tokenizer and builds the agent) takes seconds, and training loops call run_dataset
# every step with the same settings. One pool is kept, for the last settings used:
# actors reserve CPUs, so a pool left behind for other settings would starve a new one.
_actor_pools: dict[tuple[str, int], list[Any]] = {}


class RayUnavailableError(AgentsGymError):
    """Ray is not installed, or the cluster could not be reached."""


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailableError(
            "executor='ray' needs Ray: pip install 'agentsgym[ray]'"
        ) from exc
    return ray


@dataclass(frozen=True)
class WorkerSettings:
    """What every worker builds its envs and agents from (pickled to the workers)."""

    tokenizer: Any
    allow_class_paths: Any
    agent: AgentSpec | None
    agents: dict[str, AgentSpec]
    max_concurrency: int
    seed: int
    allow_remote: Any = None


class RolloutWorker:
    """The body of a Ray actor: plays the trials of one task per call."""

    def __init__(self, settings: WorkerSettings) -> None:
        from agentsgym.factory import load_tokenizer

        self.settings = settings
        self.tokenizer = load_tokenizer(settings.tokenizer)
        self.envs: dict[tuple[str, str], Any] = {}
        self._agents: dict[str | None, Any] = {}

    def _agent(self, env_class_path: str) -> Any:
        key = env_class_path if env_class_path in self.settings.agents else None
        if key not in self._agents:
            spec = self.settings.agents.get(env_class_path, self.settings.agent)
            if spec is None:
                raise AgentsGymError(f"no agent for the rows of {env_class_path}")
            self._agents[key] = spec.build()
        return self._agents[key]

    async def play(
        self, row: dict[str, Any], task_index: int, rollout_indices: list[int]
    ) -> list[tuple[tuple[int, int], list[Episode]]]:
        from agentsgym.dataset_runner import build_envs
        from agentsgym.runner import arun_jobs

        parsed = DatasetRow.model_validate(row)
        envs = build_envs(
            [parsed],
            tokenizer=self.tokenizer,
            allow_class_paths=self.settings.allow_class_paths,
            envs=self.envs,
            allow_remote=self.settings.allow_remote,
        )
        env = envs[parsed.env_key()]
        agent = self._agent(parsed.env_class_path)
        jobs = [TrialJob(env, parsed.task_data, task_index, r) for r in rollout_indices]
        results = await arun_jobs(
            jobs,
            agent,
            max_concurrency=self.settings.max_concurrency,
            seed=self.settings.seed,
        )
        for episodes in results.values():
            for episode in episodes:
                episode.agent_state = None  # the agent's memory stays in the worker
        return sorted(results.items())

    def ping(self) -> int:
        import os

        return os.getpid()


class RayExecutor:
    """Plays trial jobs on ``num_workers`` Ray actors (see the module docstring).

    :param num_workers: actors to start (each one process).
    :param address: a Ray cluster address (``ray://host:10001``, ``auto``); ``None``
        starts or joins a local Ray.
    :param tasks_in_flight: tasks each worker plays at once (its trials run
        concurrently within the worker, up to the run's ``max_concurrency``).
    :param max_task_retries: how often the tasks of a dead worker are retried.
    :param num_cpus_per_worker: Ray CPUs each actor reserves.
    """

    def __init__(
        self,
        num_workers: int = 2,
        *,
        address: str | None = None,
        tasks_in_flight: int = DEFAULT_TASKS_IN_FLIGHT,
        max_task_retries: int = MAX_TASK_RETRIES,
        num_cpus_per_worker: float = 1.0,
    ) -> None:
        if num_workers < 1:
            raise ValueError(f"num_workers must be at least 1, got {num_workers}")
        self.num_workers = num_workers
        self.address = address
        self.tasks_in_flight = max(1, tasks_in_flight)
        self.max_task_retries = max(0, max_task_retries)
        self.num_cpus_per_worker = num_cpus_per_worker
        self.ray = import_ray()

    def _ensure_ray(self) -> None:
        if self.ray.is_initialized():
            return
        try:
            if self.address is None:
                self.ray.init(include_dashboard=False, log_to_driver=False)
            else:
                self.ray.init(address=self.address, log_to_driver=False)
        except Exception as exc:
            raise RayUnavailableError(
                f"could not start or reach Ray ({type(exc).__name__}: {exc}); check "
                "--ray-address, or start a cluster with `ray start --head`"
            ) from exc

    def _actor_class(self) -> Any:
        return self.ray.remote(num_cpus=self.num_cpus_per_worker, max_concurrency=1000)(
            RolloutWorker
        )

    async def arun(
        self,
        rows: Sequence[DatasetRow],
        keys: Sequence[tuple[int, int]],
        settings: WorkerSettings,
        *,
        on_episode: EpisodeCallback | None = None,
        on_trial: TrialCallback | None = None,
        job_of: Callable[[int, int], TrialJob] | None = None,
    ) -> dict[tuple[int, int], list[Episode]]:
        """Play the trials ``keys`` of ``rows``; episodes by key.

        ``job_of(task, rollout)`` gives the driver-side job handed to ``on_trial``.
        """
        self._ensure_ray()
        by_task: dict[int, list[int]] = {}
        for task_index, rollout_index in keys:
            by_task.setdefault(task_index, []).append(rollout_index)
        pending = list(by_task.items())
        results: dict[tuple[int, int], list[Episode]] = {}
        if not pending:
            return results
        actor_class = self._actor_class()
        workers = self._workers(actor_class, settings)
        attempts: dict[int, int] = {}
        in_flight: dict[Any, tuple[Any, int, list[int]]] = {}
        replaced: dict[Any, Any] = {}  # a dead actor -> the actor started in its place

        def submit(worker: Any) -> bool:
            if not pending:
                return False
            task_index, rollouts = pending.pop(0)
            row = rows[task_index].model_dump()
            ref = worker.play.remote(row, task_index, rollouts)
            in_flight[ref] = (worker, task_index, rollouts)
            return True

        for worker in workers:
            for _ in range(self.tasks_in_flight):
                if not submit(worker):
                    break
        try:
            while in_flight:
                done, _ = await asyncio.to_thread(
                    self.ray.wait, list(in_flight), num_returns=1, timeout=None
                )
                ref = done[0]
                worker, task_index, rollouts = in_flight.pop(ref)
                try:
                    played = await asyncio.to_thread(self.ray.get, ref)
                except self.ray.exceptions.RayActorError as exc:
                    if worker not in replaced:
                        replaced[worker] = self._replace(worker, workers, actor_class, settings)
                    replacement = replaced[worker]
                    self._retry_or_fail(
                        task_index, rollouts, exc, attempts, pending, results, rows, on_episode,
                        on_trial, job_of,
                    )
                    self._refill(replacement, in_flight, submit)
                    continue
                except self.ray.exceptions.RayTaskError as exc:
                    # An exception in our own code, not in an episode: a bug or a bad row.
                    raise AgentsGymError(
                        f"a Ray worker failed on task {task_index}: {exc.cause!r}"
                    ) from exc
                for key, episodes in played:
                    results[tuple(key)] = episodes  # type: ignore[index]
                    if on_episode is not None:
                        for episode in episodes:
                            on_episode(episode)
                    if on_trial is not None and job_of is not None:
                        on_trial(job_of(*key), episodes)
                self._refill(worker, in_flight, submit)
        except BaseException:
            # Interrupted (Ctrl-C, an error): calls may still be running on the
            # actors; they are not reused.
            self._discard(settings)
            raise
        return results

    def _pool_key(self, settings: WorkerSettings) -> tuple[str, int]:
        import hashlib

        blob = self.ray.cloudpickle.dumps(settings)
        return hashlib.sha256(blob).hexdigest(), int(self.num_cpus_per_worker * 1000)

    def _workers(self, actor_class: Any, settings: WorkerSettings) -> list[Any]:
        key = self._pool_key(settings)
        if key not in _actor_pools:
            shutdown_workers()
        pool = _actor_pools.setdefault(key, [])
        while len(pool) < self.num_workers:
            pool.append(actor_class.remote(settings))
        return pool[: self.num_workers]

    def _discard(self, settings: WorkerSettings) -> None:
        for worker in _actor_pools.pop(self._pool_key(settings), []):
            try:
                self.ray.kill(worker)
            except Exception:  # already dead
                pass

    def _refill(self, worker: Any, in_flight: dict[Any, Any], submit: Callable[[Any], bool]) -> None:
        busy = sum(1 for w, _, _ in in_flight.values() if w is worker)
        for _ in range(self.tasks_in_flight - busy):
            if not submit(worker):
                break

    def _replace(self, dead: Any, workers: list[Any], actor_class: Any, settings: WorkerSettings) -> Any:
        logger.warning("a Ray rollout worker died; starting a replacement")
        replacement = actor_class.remote(settings)
        workers[workers.index(dead)] = replacement
        pool = _actor_pools.get(self._pool_key(settings), [])
        if dead in pool:
            pool[pool.index(dead)] = replacement
        return replacement

    def _retry_or_fail(
        self,
        task_index: int,
        rollouts: list[int],
        exc: BaseException,
        attempts: dict[int, int],
        pending: list[tuple[int, list[int]]],
        results: dict[tuple[int, int], list[Episode]],
        rows: Sequence[DatasetRow],
        on_episode: EpisodeCallback | None,
        on_trial: TrialCallback | None,
        job_of: Callable[[int, int], TrialJob] | None,
    ) -> None:
        attempts[task_index] = attempts.get(task_index, 0) + 1
        if attempts[task_index] <= self.max_task_retries:
            logger.warning(
                "task %d was on a worker that died (%s); retrying it (attempt %d of %d)",
                task_index, type(exc).__name__, attempts[task_index] + 1, self.max_task_retries + 1,
            )
            pending.insert(0, (task_index, rollouts))
            return
        row = rows[task_index]
        error = (
            f"WorkerDiedError: the Ray worker playing this trial died "
            f"{attempts[task_index]} times ({type(exc).__name__}); see the Ray logs"
        )
        logger.error("task %d failed on %d dead workers; recorded as failed", task_index, attempts[task_index])
        for rollout_index in rollouts:
            episode = Episode(
                session_id=f"ray-{task_index}-{rollout_index}",
                env_id=row.env_class_path,
                task_data=dict(row.task_data),
                error=error,
                task_index=task_index,
                rollout_index=rollout_index,
            )
            results[(task_index, rollout_index)] = [episode]
            if on_episode is not None:
                on_episode(episode)
            if on_trial is not None and job_of is not None:
                on_trial(job_of(task_index, rollout_index), [episode])


def tasks_in_flight_for(max_concurrency: int, num_rollouts: int) -> int:
    """Tasks per worker so that about ``max_concurrency`` trials run in each."""
    return max(1, math.ceil(max_concurrency / max(1, num_rollouts)))


def shutdown_workers() -> None:
    """Stop the rollout actors this process started (they stop with Ray anyway)."""
    ray = import_ray()
    for pool in _actor_pools.values():
        for worker in pool:
            try:
                ray.kill(worker)
            except Exception:  # already dead
                pass
    _actor_pools.clear()
