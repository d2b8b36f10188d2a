"""agentsgym-ray's plugin: registers the ``ray`` executor."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentsgym import hookimpl

if TYPE_CHECKING:
    from agentsgym.hookspecs import RegisterExecutor


@hookimpl
def register_executors(register: RegisterExecutor) -> None:
    register(
        "ray",
        "agentsgym_ray.executor:RayExecutor",
        description="Ray actors, one process each, on this machine or a cluster (options: "
        "num_workers, address, num_cpus_per_worker, max_task_retries)",
    )
