"""Run a dataset whose rows may name different envs: one env instance per
(env_class_path, env_config), all trials played together by an executor."""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentsgym.aio import sync_twin
from agentsgym.engine import DEFAULT_MAX_CONCURRENCY, check_run_settings, make_groups
from agentsgym.errors import RunSettingsError
from agentsgym.executors import (
    AgentSpec,
    ExecutionRequest,
    Executor,
    build_envs,
    make_executor,
    options_taken,
)
from agentsgym.rows import DatasetRow, parse_rows
from agentsgym.trajectory import TrajectoryBatch

if TYPE_CHECKING:
    from agentsgym.agents import Agent
    from agentsgym.engine import EpisodeCallback, TrialCallback
    from agentsgym.env import MultistepEnv


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
    executor: str | Executor = "local",
    num_workers: int | None = None,
    executor_options: Mapping[str, Any] | None = None,
    allow_remote: bool | Sequence[str] | None = None,
) -> TrajectoryBatch:
    """Play every row ``num_rollouts`` times; group ``i`` of the batch is row ``i``.

    Rows are validated and every env is built before any episode is played, so a typo
    fails fast. The trials of all rows share one pool of ``max_concurrency`` slots.

    :param agent: plays every row whose env has no agent in ``agents``.
    :param agents: an agent per env (by the rows' ``env_class_path``), for mixed
        datasets whose envs need different players.
    :param envs: a cache of env instances by :meth:`DatasetRow.env_key`, filled and
        reused across calls (training loops play the same envs every step).
    :param skip: ``(task_index, rollout_index)`` trials not to play (already played by
        a run being resumed); their groups hold only the trials played now.
    :param executor: a registered executor's name or an executor object (a remote one
        needs agents given as registered names or :class:`~agentsgym.runtime.AgentSpec` recipes).
    :param executor_options: options for a named executor's factory (the cluster to
        join, ...: the executor's docs list them); ``num_workers`` is its
        ``"num_workers"``, passed only to an executor that takes it (``local`` ignores it).
    :param allow_remote: let rows name env server URLs (``True`` or URL prefixes;
        default from ``AGENTSGYM_ALLOW_REMOTE_ENVS``); see docs/serving.md.
    """
    check_run_settings(num_rollouts, max_concurrency)
    options = dict(executor_options or {})
    if isinstance(executor, str):
        given = {"num_workers": num_workers} if num_workers is not None else {}
        options.update(options_taken(executor, given))
        executor = make_executor(executor, **options)
    elif options:
        raise RunSettingsError("executor options go with an executor name, not an executor")
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
    trials = itertools.product(range(len(parsed)), range(num_rollouts))
    keys = [key for key in trials if key not in skipped]
    request = ExecutionRequest(
        rows=parsed,
        keys=keys,
        envs=envs,
        agent=agent,
        agents=agents,
        num_rollouts=num_rollouts,
        # a tokenizer name or path is loaded in each remote worker; an object is shipped
        tokenizer=tokenizer,
        allow_class_paths=allow_class_paths,
        allow_remote=allow_remote,
        max_concurrency=max_concurrency,
        seed=seed,
    )
    results = await executor.arun(request, on_episode=on_episode, on_trial=on_trial)
    groups = []
    for index, row in enumerate(parsed):
        episodes = [results[(index, r)] for r in range(num_rollouts) if (index, r) in results]
        groups.extend(make_groups(envs[row.env_key()], index, row.task_data, episodes))
    return TrajectoryBatch(groups)


run_dataset = sync_twin(arun_dataset)
