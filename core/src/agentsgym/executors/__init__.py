"""Where trials run: ``local`` (this process's event loop, the default) or ``ray``
(Ray actors on one machine or a cluster).

Both take the same trial jobs and hand back episodes by ``(task_index,
rollout_index)``, calling ``on_episode`` / ``on_trial`` in the calling process as
trials finish, so :func:`agentsgym.run_dataset` builds the same
:class:`~agentsgym.trajectory.TrajectoryBatch` either way.
"""

from __future__ import annotations

EXECUTORS = ("local", "ray")

__all__ = ["EXECUTORS"]
