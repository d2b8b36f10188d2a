"""Run a dataset whose rows may name different envs: one env instance per
(env_class_path, env_config), every row's trials scheduled together, groups returned
in row order."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentsgym.agents.spec import AgentSpec, as_agent_spec
from agentsgym.aio import run_sync
from agentsgym.errors import RunSettingsError
from agentsgym.executors import EXECUTORS
from agentsgym.factory import load_tokenizer, make
from agentsgym.rows import DatasetRow, parse_rows
from agentsgym.runner import (
    DEFAULT_MAX_CONCURRENCY,
    TrialJob,
    arun_jobs,
    check_run_settings,
    make_group,
)
from agentsgym.trajectory import TrajectoryBatch

if TYPE_CHECKING:
    from agentsgym.agents import Agent
    from agentsgym.env import MultistepEnv
    from agentsgym.runner import EpisodeCallback, TrialCallback


def build_envs(
    rows: Sequence[DatasetRow],
    *,
    tokenizer: Any = None,
    allow_class_paths: bool | Sequence[str] | None = None,
    envs: dict[tuple[str, str], MultistepEnv] | None = None,
    allow_remote: bool | Sequence[str] | None = None,
) -> dict[tuple[str, str], MultistepEnv]:
    """One env per distinct :meth:`DatasetRow.env_key`, built before any episode plays
    (so an unknown id or a bad config fails fast), reusing those already in ``envs``."""
    envs = {} if envs is None else envs
    loaded: list[Any] = []  # the tokenizer, loaded once and only if an env is missing
    for row in rows:
        key = row.env_key()
        if key not in envs:
            if not loaded:
                loaded.append(load_tokenizer(tokenizer))
            tokenizer = loaded[0]
            envs[key] = make(
                row.env_class_path,
                tokenizer=tokenizer,
                env_config=row.env_config,
                allow_class_paths=allow_class_paths,
                allow_remote=allow_remote,
            )
    return envs


async def arun_dataset(
    rows: Iterable[Mapping[str, Any] | DatasetRow],
    agent: Agent | AgentSpec | str | None,
    num_rollouts: int = 1,
    *,
    agents: Mapping[str, Agent | AgentSpec | str] | None = None,
    tokenizer: Any = None,
    allow_class_paths: bool | Sequence[str] | None = None,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    seed: int = 0,
    on_episode: EpisodeCallback | None = None,
    on_trial: TrialCallback | None = None,
    envs: dict[tuple[str, str], MultistepEnv] | None = None,
    skip: Collection[tuple[int, int]] = (),
    executor: str = "local",
    num_workers: int = 2,
    ray_address: str | None = None,
    allow_remote: bool | Sequence[str] | None = None,
) -> TrajectoryBatch:
    """The coroutine of :func:`run_dataset`."""
    check_run_settings(num_rollouts, max_concurrency)
    if executor not in EXECUTORS:
        raise RunSettingsError(
            f"executor must be one of {', '.join(EXECUTORS)}, got {executor!r}"
        )
    parsed = parse_rows(rows)
    envs = build_envs(
        parsed,
        tokenizer=tokenizer,
        allow_class_paths=allow_class_paths,
        envs=envs,
        allow_remote=allow_remote,
    )
    agents = dict(agents or {})
    missing = sorted({r.env_class_path for r in parsed if r.env_class_path not in agents})
    if agent is None and missing:
        raise RunSettingsError(
            f"no agent for the rows of {', '.join(missing)}: give agent= for every env, or "
            "agents={env_id: agent} for each of them"
        )
    skipped = set(skip)
    keys = [
        (index, rollout)
        for index in range(len(parsed))
        for rollout in range(num_rollouts)
        if (index, rollout) not in skipped
    ]

    def job_of(index: int, rollout: int) -> TrialJob:
        row = parsed[index]
        return TrialJob(envs[row.env_key()], row.task_data, index, rollout, agents.get(row.env_class_path))

    if executor == "ray":
        from agentsgym.executors.ray import RayExecutor, WorkerSettings, tasks_in_flight_for

        settings = WorkerSettings(
            # a name or path is loaded in each worker; a tokenizer object is shipped
            tokenizer=tokenizer,
            allow_class_paths=allow_class_paths,
            agent=None if agent is None else as_agent_spec(agent),
            agents={k: as_agent_spec(v) for k, v in agents.items()},
            max_concurrency=max_concurrency,
            seed=seed,
            allow_remote=allow_remote,
        )
        ray_executor = RayExecutor(
            num_workers,
            address=ray_address,
            tasks_in_flight=tasks_in_flight_for(max_concurrency, num_rollouts),
        )
        results = await ray_executor.arun(
            parsed, keys, settings, on_episode=on_episode, on_trial=on_trial, job_of=job_of
        )
    else:
        # Locally, recipes are built here; agent objects are used as they are.
        agents.update({k: _built(v) for k, v in agents.items()})
        results = await arun_jobs(
            [job_of(index, rollout) for index, rollout in keys],
            _built(agent),
            max_concurrency=max_concurrency,
            seed=seed,
            on_episode=on_episode,
            on_trial=on_trial,
        )
    return TrajectoryBatch(
        [
            make_group(
                envs[row.env_key()],
                index,
                row.task_data,
                [results[(index, r)] for r in range(num_rollouts) if (index, r) in results],
            )
            for index, row in enumerate(parsed)
        ]
    )


def run_dataset(
    rows: Iterable[Mapping[str, Any] | DatasetRow],
    agent: Agent | AgentSpec | str | None,
    num_rollouts: int = 1,
    *,
    agents: Mapping[str, Agent | AgentSpec | str] | None = None,
    tokenizer: Any = None,
    allow_class_paths: bool | Sequence[str] | None = None,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    seed: int = 0,
    on_episode: EpisodeCallback | None = None,
    on_trial: TrialCallback | None = None,
    envs: dict[tuple[str, str], MultistepEnv] | None = None,
    skip: Collection[tuple[int, int]] = (),
    executor: str = "local",
    num_workers: int = 2,
    ray_address: str | None = None,
    allow_remote: bool | Sequence[str] | None = None,
) -> TrajectoryBatch:
    """Play every row ``num_rollouts`` times; group ``i`` of the batch is row ``i``.

    Rows are validated first (a bad row raises naming its index and field), and every
    env is built before any episode is played, so a typo fails fast. The trials of
    all rows share one pool of ``max_concurrency`` slots, whatever env they use.

    :param agent: plays every row whose env has no agent in ``agents``.
    :param agents: an agent per env (by the rows' ``env_class_path``), for mixed
        datasets whose envs need different players.
    :param envs: a cache of env instances by :meth:`DatasetRow.env_key`, filled and
        reused across calls (training loops play the same envs every step).
    :param skip: ``(task_index, rollout_index)`` trials not to play (already played by
        a run being resumed); their groups hold only the trials played now.
    :param executor: ``"local"`` (this process's event loop) or ``"ray"`` (Ray
        actors; then agents are given as registered names or
        :class:`~agentsgym.AgentSpec` recipes, built in each worker).
    :param num_workers: Ray actors (``executor="ray"``).
    :param ray_address: a Ray cluster to join (default: start or join a local one).
    :param allow_remote: let rows name env server URLs (``True`` or URL prefixes;
        default from ``AGENTSGYM_ALLOW_REMOTE_ENVS``); see docs/serving.md.
    """
    return run_sync(
        arun_dataset(
            rows,
            agent,
            num_rollouts,
            agents=agents,
            tokenizer=tokenizer,
            allow_class_paths=allow_class_paths,
            max_concurrency=max_concurrency,
            seed=seed,
            on_episode=on_episode,
            on_trial=on_trial,
            envs=envs,
            skip=skip,
            executor=executor,
            num_workers=num_workers,
            ray_address=ray_address,
            allow_remote=allow_remote,
        )
    )


def _built(agent: Any) -> Any:
    """An agent object from an agent, a registered name or an AgentSpec."""
    if isinstance(agent, (AgentSpec, str)):
        return as_agent_spec(agent).build()
    return agent
