"""Run a dataset whose rows may name different envs: one env instance per
(env_class_path, env_config), every row's trials scheduled together, groups returned
in row order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentsgym.aio import run_sync
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
) -> dict[tuple[str, str], MultistepEnv]:
    """One env per distinct :meth:`DatasetRow.env_key`, built before any episode plays
    (so an unknown id or a bad config fails fast), reusing those already in ``envs``."""
    envs = {} if envs is None else envs
    tokenizer = load_tokenizer(tokenizer)
    for row in rows:
        key = row.env_key()
        if key not in envs:
            envs[key] = make(
                row.env_class_path,
                tokenizer=tokenizer,
                env_config=row.env_config,
                allow_class_paths=allow_class_paths,
            )
    return envs


async def arun_dataset(
    rows: Iterable[Mapping[str, Any] | DatasetRow],
    agent: Agent | None,
    num_rollouts: int = 1,
    *,
    agents: Mapping[str, Agent] | None = None,
    tokenizer: Any = None,
    allow_class_paths: bool | Sequence[str] | None = None,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    seed: int = 0,
    on_episode: EpisodeCallback | None = None,
    on_trial: TrialCallback | None = None,
    envs: dict[tuple[str, str], MultistepEnv] | None = None,
) -> TrajectoryBatch:
    """The coroutine of :func:`run_dataset`."""
    check_run_settings(num_rollouts, max_concurrency)
    parsed = parse_rows(rows)
    envs = build_envs(parsed, tokenizer=tokenizer, allow_class_paths=allow_class_paths, envs=envs)
    agents = dict(agents or {})
    missing = sorted({r.env_class_path for r in parsed if r.env_class_path not in agents})
    if agent is None and missing:
        raise ValueError(
            f"no agent for the rows of {', '.join(missing)}: give agent= for every env, or "
            "agents={env_id: agent} for each of them"
        )
    jobs = [
        TrialJob(
            envs[row.env_key()], row.task_data, index, rollout, agents.get(row.env_class_path)
        )
        for index, row in enumerate(parsed)
        for rollout in range(num_rollouts)
    ]
    results = await arun_jobs(
        jobs,
        agent,
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
                [results[(index, r)] for r in range(num_rollouts)],
            )
            for index, row in enumerate(parsed)
        ]
    )


def run_dataset(
    rows: Iterable[Mapping[str, Any] | DatasetRow],
    agent: Agent | None,
    num_rollouts: int = 1,
    *,
    agents: Mapping[str, Agent] | None = None,
    tokenizer: Any = None,
    allow_class_paths: bool | Sequence[str] | None = None,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    seed: int = 0,
    on_episode: EpisodeCallback | None = None,
    on_trial: TrialCallback | None = None,
    envs: dict[tuple[str, str], MultistepEnv] | None = None,
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
        )
    )
