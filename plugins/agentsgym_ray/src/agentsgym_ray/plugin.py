"""agentsgym-ray's plugin: registers the ``ray`` executor and its ``--ray-address`` flag."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentsgym import hookimpl
from agentsgym.runtime import ExecutorFlag

if TYPE_CHECKING:
    from agentsgym.runtime import RegisterExecutor


@hookimpl
def register_executors(register: RegisterExecutor) -> None:
    register(
        "ray",
        "agentsgym_ray.executor:RayExecutor",
        description="Ray actors, one process each, on this machine or a cluster (options: "
        "num_workers, address, num_cpus_per_worker, max_task_retries)",
        flags=[
            ExecutorFlag(
                flag="--ray-address",
                option="address",
                metavar="ADDR",
                help="a Ray cluster to join (auto, ray://HOST:10001); default: start or join "
                "a local Ray",
            )
        ],
    )
