"""The rows a finished trial becomes in an output file, and how to tell they are all there.

A rollout trial becomes its scored episode, one row per token segment, or the episode
that failed; an eval trial one row. Every row names its trial: task_index, rollout_index.
A trial of an env with roles becomes those rows for every role (the ``role`` column),
and each of its rows says how many the trial has (``trial_rows``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentsgym.engine import make_groups
from agentsgym.trajectory import TrajectoryBatch

if TYPE_CHECKING:
    from agentsgym.engine import TrialJob
    from agentsgym.trajectory import Episode

TrialKey = tuple[int, int]


def trial_key(row: dict[str, Any]) -> TrialKey:
    """(task_index, rollout_index) of a row; KeyError/TypeError when it has none."""
    task, rollout = row["task_index"], row["rollout_index"]
    if any(isinstance(index, bool) or not isinstance(index, int) for index in (task, rollout)):
        raise TypeError("task_index and rollout_index must be integers")
    return task, rollout


def expected_rows(row: dict[str, Any]) -> int:
    """How many rows the trial of ``row`` has (any of its rows says it): one per segment
    for a successful, segmented episode; one for every other trial; a trial of several
    roles says its count (``trial_rows``)."""
    trial_rows = row.get("trial_rows")
    if isinstance(trial_rows, int) and not isinstance(trial_rows, bool) and trial_rows >= 1:
        return trial_rows
    segments = row.get("num_segments")
    if row.get("error") is not None or not isinstance(segments, int) or segments <= 1:
        return 1
    return segments


def rollout_rows(job: TrialJob, episodes: list[Episode]) -> list[dict[str, Any]]:
    """The output rows of one finished rollout trial (see the module docstring)."""
    roles = job.env.role_names
    groups = make_groups(job.env, job.task_index, job.task_data, [episodes], roles=roles)
    rows = TrajectoryBatch(groups).to_records()
    for row in rows:
        row["group_index"] = job.task_index
        if roles:
            row["trial_rows"] = len(rows)
    expected = expected_rows(rows[0]) if rows else 1
    if len(rows) != expected:
        raise RuntimeError(
            f"trial {job.key} made {len(rows)} rows where its rows say {expected}; "
            "this is an agentsgym bug (the journal could not tell a torn trial from it)"
        )
    return rows
