"""Executors: where the trials of a run are played.

An executor takes an :class:`ExecutionRequest` (the rows, which trials of them to
play, the envs built in this process, who plays) and returns the episodes by
``(task_index, rollout_index)``, calling ``on_episode`` / ``on_trial`` in this
process as trials finish, so :func:`agentsgym.run_dataset` builds the same batch and
the CLI streams the same output whichever executor played. Executors register
through the ``register_executors`` hook: the core's ``local`` one plays on this
process's event loop; plugin distributions add others (``agentsgym-ray``: Ray
actors). A remote executor builds agents in its workers from
:class:`AgentSpec` recipes, since a live agent cannot be shipped.
"""

from agentsgym.executors.agent_spec import AgentSpec, as_agent_spec, built_agent
from agentsgym.executors.envs import build_envs
from agentsgym.executors.local import LocalExecutor
from agentsgym.executors.protocol import ExecutionRequest, Executor, make_executor

__all__ = [
    "AgentSpec",
    "ExecutionRequest",
    "Executor",
    "LocalExecutor",
    "as_agent_spec",
    "build_envs",
    "built_agent",
    "make_executor",
]
