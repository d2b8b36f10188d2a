"""Run a dataset whose rows may name different envs: one env instance per
(env_class_path, env_config), groups returned in row order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentsgym.factory import load_tokenizer, make
from agentsgym.rows import DatasetRow, parse_rows
from agentsgym.trajectory import TrajectoryBatch, TrajectoryGroup

if TYPE_CHECKING:
    from agentsgym.agents import Agent
    from agentsgym.env import MultistepEnv
    from agentsgym.runner import EpisodeCallback


def run_dataset(
    rows: Iterable[Mapping[str, Any] | DatasetRow],
    agent: Agent,
    num_rollouts: int = 1,
    *,
    tokenizer: Any = None,
    allow_class_paths: bool | Sequence[str] | None = None,
    max_concurrency: int = 8,
    on_episode: EpisodeCallback | None = None,
    envs: dict[tuple[str, str], MultistepEnv] | None = None,
) -> TrajectoryBatch:
    """Play every row ``num_rollouts`` times; group ``i`` of the batch is row ``i``.

    Rows are validated first (a bad row raises naming its index and field), and every
    env id is resolved before any episode is played, so a typo fails fast.

    :param envs: a cache of env instances by :meth:`DatasetRow.env_key`, filled and
        reused across calls (training loops play the same envs every step).
    """
    parsed = parse_rows(rows)
    tokenizer = load_tokenizer(tokenizer)
    envs = {} if envs is None else envs
    members: dict[tuple[str, str], list[int]] = {}
    for index, row in enumerate(parsed):
        key = row.env_key()
        if key not in envs:
            envs[key] = make(
                row.env_class_path,
                tokenizer=tokenizer,
                env_config=row.env_config,
                allow_class_paths=allow_class_paths,
            )
        members.setdefault(key, []).append(index)
    groups: list[TrajectoryGroup | None] = [None] * len(parsed)
    for key, indices in members.items():
        batch = envs[key].run_trial(
            [parsed[i].task_data for i in indices],
            agent,
            num_rollouts,
            max_concurrency=max_concurrency,
            on_episode=on_episode,
        )
        for index, group in zip(indices, batch.groups):
            group.task_index = index
            for trial in group.trials:
                for episode in trial:
                    episode.task_index = index
            groups[index] = group
    return TrajectoryBatch([g for g in groups if g is not None])
