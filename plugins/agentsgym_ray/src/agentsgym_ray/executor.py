"""The Ray executor: trials spread over Ray actors, results streamed back.

Each actor (:class:`RolloutWorker`) is a process with its own event loop, env cache,
tokenizer and agent, built in the worker from an :class:`~agentsgym.runtime.AgentSpec` (a live
agent is never pickled). The driver sends work in *calls* of whole tasks (all of a
task's rollouts, so a group comes back whole; a few tasks per call when tasks have few
rollouts, so that Ray's per-call cost is shared by at least
:data:`MIN_TRIALS_PER_CALL` trials), keeps every actor busy with several calls in
flight, and as results come back calls ``on_episode`` / ``on_trial`` in the driver
process, so streaming writers and progress bars work as with the local executor.

A worker that dies (killed, out of memory, its node lost) is reported; its unfinished
tasks are retried on a fresh actor up to ``max_task_retries`` times, then recorded as
failed episodes with the error. Nothing is silently lost.

Registered as the ``ray`` executor by this distribution's plugin (``--executor ray``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentsgym import Episode, load_tokenizer
from agentsgym.errors import AgentsGymError, RunSettingsError
from agentsgym.executors import (
    EpisodeCallback,
    ExecutionRequest,
    TrialCallback,
    TrialJob,
    arun_jobs,
    build_envs,
)
from agentsgym.runtime import AgentSpec, DatasetRow

logger = logging.getLogger(__name__)

MAX_TASK_RETRIES = 2
MIN_TRIALS_PER_CALL = 8
CLOSE_TIMEOUT_SECONDS = 10.0
"""How long stopping the workers waits for them to close their envs."""
"""Tasks are batched into one actor call until it holds this many trials: a Ray call
costs about a millisecond of driver and worker time, a trivial trial far less."""

Unit = list[tuple[int, list[int]]]  # the (task index, rollout indices) of one call

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
            "executor='ray' needs Ray: pip install ray, or install agentsgym-ray again from "
            "the clone (pip install -e ./plugins/agentsgym_ray)"
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
        self, tasks: list[tuple[dict[str, Any], int, list[int]]]
    ) -> list[tuple[tuple[int, int], list[Episode]]]:
        """Play the given rollouts of each ``(row, task index, rollout indices)``."""
        jobs = []
        for row, task_index, rollout_indices in tasks:
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
            jobs += [TrialJob(env, parsed.task_data, task_index, r, agent) for r in rollout_indices]
        results = await arun_jobs(
            jobs,
            None,
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

    def close(self) -> None:
        """Close the envs and agents this worker built (server connections, tool
        processes); called before the actor is stopped."""
        for built in [*self.envs.values(), *self._agents.values()]:
            closer = getattr(built, "close", None)
            if not callable(closer):
                continue
            try:
                closer()
            except Exception:  # closing one must not keep the others open
                logger.exception("closing %r in a Ray worker failed", built)
        self.envs.clear()
        self._agents.clear()


class RayExecutor:
    """Plays trial jobs on ``num_workers`` Ray actors (see the module docstring).

    :param num_workers: actors to start (each one process).
    :param address: a Ray cluster address (``ray://host:10001``, ``auto``); ``None``
        starts or joins a local Ray.
    :param tasks_in_flight: tasks each worker plays at once (its trials run
        concurrently within the worker, up to the run's ``max_concurrency``); by
        default enough for about ``max_concurrency`` trials per worker.
    :param max_task_retries: how often the tasks of a dead worker are retried.
    :param num_cpus_per_worker: Ray CPUs each actor reserves.
    """

    remote = True

    def __init__(
        self,
        num_workers: int = 2,
        *,
        address: str | None = None,
        tasks_in_flight: int | None = None,
        max_task_retries: int = MAX_TASK_RETRIES,
        num_cpus_per_worker: float = 1.0,
    ) -> None:
        if num_workers < 1:
            raise RunSettingsError(f"num_workers must be at least 1, got {num_workers}")
        self.num_workers = num_workers
        self.address = address
        self.tasks_in_flight = None if tasks_in_flight is None else max(1, tasks_in_flight)
        self.max_task_retries = max(0, max_task_retries)
        self.num_cpus_per_worker = num_cpus_per_worker
        self.ray = import_ray()

    def _ensure_ray(self) -> None:
        if self.ray.is_initialized():
            return
        try:
            if self.address is None:
                # Ray starts workers 15 niceness steps below the driver so that the
                # driver stays responsive; here the workers are the work, and behind
                # every other process of a busy machine they would crawl.
                os.environ.setdefault("RAY_worker_niceness", "0")
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
        request: ExecutionRequest,
        *,
        on_episode: EpisodeCallback | None = None,
        on_trial: TrialCallback | None = None,
    ) -> dict[tuple[int, int], list[Episode]]:
        """Play the trials of ``request`` on the actors; episodes by key."""
        agent, agents = request.agent_specs()
        settings = WorkerSettings(
            # a name or path is loaded in each worker; a tokenizer object is shipped
            tokenizer=request.tokenizer,
            allow_class_paths=request.allow_class_paths,
            agent=agent,
            agents=agents,
            max_concurrency=request.max_concurrency,
            seed=request.seed,
            allow_remote=request.allow_remote,
        )
        tasks_in_flight = self.tasks_in_flight or tasks_in_flight_for(
            request.max_concurrency, request.num_rollouts
        )
        return await self._arun(
            request.rows,
            request.keys,
            settings,
            tasks_in_flight,
            on_episode=on_episode,
            on_trial=on_trial,
            job_of=request.job,
        )

    async def _arun(
        self,
        rows: Sequence[DatasetRow],
        keys: Sequence[tuple[int, int]],
        settings: WorkerSettings,
        tasks_in_flight: int,
        *,
        on_episode: EpisodeCallback | None,
        on_trial: TrialCallback | None,
        job_of: Callable[[int, int], TrialJob],
    ) -> dict[tuple[int, int], list[Episode]]:
        self._ensure_ray()
        by_task: dict[int, list[int]] = {}
        for task_index, rollout_index in keys:
            by_task.setdefault(task_index, []).append(rollout_index)
        pending = self._units(by_task)
        results: dict[tuple[int, int], list[Episode]] = {}
        if not pending:
            return results
        actor_class = self._actor_class()
        workers = self._workers(actor_class, settings)
        attempts: dict[int, int] = {}
        in_flight: dict[Any, tuple[Any, Unit]] = {}
        replaced: dict[Any, Any] = {}  # a dead actor -> the actor started in its place
        per_call = self._tasks_per_call(by_task)
        calls_per_worker = max(1, math.ceil(tasks_in_flight / per_call))

        def submit(worker: Any) -> bool:
            if not pending:
                return False
            unit = pending.pop(0)
            tasks = [(rows[t].model_dump(), t, rollouts) for t, rollouts in unit]
            in_flight[worker.play.remote(tasks)] = (worker, unit)
            return True

        for worker in workers:
            for _ in range(calls_per_worker):
                if not submit(worker):
                    break
        try:
            while in_flight:
                # Every call that is done, not only the first: one hop for a burst.
                done, _ = await asyncio.to_thread(
                    self.ray.wait, list(in_flight), num_returns=1, timeout=None
                )
                ready, _ = self.ray.wait(list(in_flight), num_returns=len(in_flight), timeout=0)
                for ref in ready or done:
                    worker, unit = in_flight.pop(ref)
                    try:
                        played = await asyncio.to_thread(self.ray.get, ref)
                    except self.ray.exceptions.RayActorError as exc:
                        if worker not in replaced:
                            replaced[worker] = self._replace(worker, workers, actor_class, settings)
                        for task_index, rollouts in unit:
                            self._retry_or_fail(
                                task_index,
                                rollouts,
                                exc,
                                attempts,
                                pending,
                                results,
                                rows,
                                on_episode,
                                on_trial,
                                job_of,
                            )
                        self._refill(replaced[worker], in_flight, submit, calls_per_worker)
                        continue
                    except self.ray.exceptions.RayTaskError as exc:
                        # An exception in our own code, not in an episode: a bug or a bad row.
                        tasks = ", ".join(str(t) for t, _ in unit)
                        raise AgentsGymError(
                            f"a Ray worker failed on task(s) {tasks}: {exc.cause!r}"
                        ) from exc
                    for key, episodes in played:
                        results[tuple(key)] = episodes  # type: ignore[index]
                        if on_episode is not None:
                            for episode in episodes:
                                on_episode(episode)
                        if on_trial is not None:
                            on_trial(job_of(*key), episodes)
                    self._refill(worker, in_flight, submit, calls_per_worker)
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

    @staticmethod
    def _tasks_per_call(by_task: dict[int, list[int]]) -> int:
        rollouts = max((len(r) for r in by_task.values()), default=1)
        return max(1, math.ceil(MIN_TRIALS_PER_CALL / rollouts))

    def _units(self, by_task: dict[int, list[int]]) -> list[Unit]:
        """The calls to make: whole tasks, batched to at least MIN_TRIALS_PER_CALL trials."""
        size = self._tasks_per_call(by_task)
        items = list(by_task.items())
        return [items[i : i + size] for i in range(0, len(items), size)]

    def _refill(
        self,
        worker: Any,
        in_flight: dict[Any, Any],
        submit: Callable[[Any], bool],
        calls_per_worker: int,
    ) -> None:
        busy = sum(1 for w, _ in in_flight.values() if w is worker)
        for _ in range(calls_per_worker - busy):
            if not submit(worker):
                break

    def _replace(
        self, dead: Any, workers: list[Any], actor_class: Any, settings: WorkerSettings
    ) -> Any:
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
        pending: list[Unit],
        results: dict[tuple[int, int], list[Episode]],
        rows: Sequence[DatasetRow],
        on_episode: EpisodeCallback | None,
        on_trial: TrialCallback | None,
        job_of: Callable[[int, int], TrialJob],
    ) -> None:
        attempts[task_index] = attempts.get(task_index, 0) + 1
        if attempts[task_index] <= self.max_task_retries:
            logger.warning(
                "task %d was on a worker that died (%s); retrying it (attempt %d of %d)",
                task_index,
                type(exc).__name__,
                attempts[task_index] + 1,
                self.max_task_retries + 1,
            )
            pending.insert(0, [(task_index, rollouts)])
            return
        row = rows[task_index]
        error = (
            f"WorkerDiedError: the Ray worker playing this trial died "
            f"{attempts[task_index]} times ({type(exc).__name__}); see the Ray logs"
        )
        logger.error(
            "task %d failed on %d dead workers; recorded as failed",
            task_index,
            attempts[task_index],
        )
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
            if on_trial is not None:
                on_trial(job_of(task_index, rollout_index), [episode])


def tasks_in_flight_for(max_concurrency: int, num_rollouts: int) -> int:
    """Tasks per worker so that about ``max_concurrency`` trials run in each."""
    return max(1, math.ceil(max_concurrency / max(1, num_rollouts)))


def shutdown_workers() -> None:
    """Stop the rollout actors this process started (they stop with Ray anyway), each
    closing the envs and agents it built first (within ``CLOSE_TIMEOUT_SECONDS``)."""
    ray = import_ray()
    workers = [worker for pool in _actor_pools.values() for worker in pool]
    _actor_pools.clear()
    if not workers or not ray.is_initialized():
        # Ray was shut down (a script's or a test's own ray.shutdown()): the workers went
        # with their cluster, and calling them would start a new one.
        return
    closing = []
    for worker in workers:
        try:
            closing.append(worker.close.remote())
        except Exception:  # a worker that died, or one of a cluster that is gone
            logger.debug("a Ray worker could not be asked to close", exc_info=True)
    try:
        ray.get(closing, timeout=CLOSE_TIMEOUT_SECONDS)
    except Exception:  # a dead or stuck worker: stopped below all the same
        logger.warning("some Ray workers did not close their envs in time", exc_info=True)
    for worker in workers:
        try:
            ray.kill(worker)
        except Exception:  # already dead
            pass
