"""agentsgym-ray: the ``ray`` executor, trials spread over Ray actors.

``agentsgym rollout ... --executor ray --num-workers N`` (or
``run_dataset(..., executor="ray")``) plays the trials of a run on Ray actors, on
one machine or a cluster, with the same output, ``--resume`` and batches as a
local run. See :class:`RayExecutor` and docs/scaling.md.
"""

from agentsgym_ray.executor import (
    RayExecutor,
    RayUnavailableError,
    RolloutWorker,
    WorkerSettings,
    shutdown_workers,
    tasks_in_flight_for,
)

__all__ = [
    "RayExecutor",
    "RayUnavailableError",
    "RolloutWorker",
    "WorkerSettings",
    "shutdown_workers",
    "tasks_in_flight_for",
]
