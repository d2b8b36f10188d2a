"""The env_config of a verifiers env: where verifiers lives, and how it plays."""

from __future__ import annotations

import os
from typing import Any

from pydantic import Field

from agentsgym_gateway import HarnessConfig

PYTHON_VARIABLE = "AGENTSGYM_VERIFIERS_PYTHON"


class VerifiersConfig(HarnessConfig):
    """A verifiers env's settings (on top of a harness env's: ``backend_url``,
    ``model``, ``episode_timeout_seconds``, ``reward_strategy``, ...)."""

    python: str | None = Field(
        default=None,
        description="the python of the venv verifiers==0.4.0 is installed in (default: "
        f"${PYTHON_VARIABLE})",
    )
    python_path: list[str] = Field(
        default_factory=list,
        description="folders put on that python's PYTHONPATH: a taskset package that is not "
        "installed there (a folder holding addition_v1/)",
    )
    taskset: dict[str, Any] = Field(
        default_factory=dict,
        description="the taskset's own settings, as verifiers' --env.taskset.* ({'game': "
        "'Wordle-v0'}, {'base_url': 'http://...'} for openenv)",
    )
    env: dict[str, Any] = Field(
        default_factory=dict,
        description="the rest of verifiers' env config, as --env.*: {'agent': {'harness': "
        "{'id': 'null'}}}; an env whose seat is not 'agent' names its own ({'player': "
        "{...}}). A seat that names no runtime runs its harness in a local subprocess "
        "(verifiers' own default is a remote Prime sandbox)",
    )
    sampling: dict[str, Any] = Field(
        default_factory=dict,
        description="verifiers' sampling of every model call ({'max_tokens': 64, "
        "'temperature': 1.0}); unset values are the model server's",
    )
    server_address: str | None = Field(
        default=None,
        description="a verifiers env server already running (tcp://host:port) for the same "
        "taskset; default: one started for this env",
    )
    num_tasks: int | None = Field(
        default=None,
        ge=1,
        description="how many of the taskset's tasks the env's dataset holds (required for "
        "an infinite taskset; default: all of a finite one)",
    )
    max_concurrent: int | None = Field(
        default=None, ge=1, description="episodes in flight on the env server (default: no cap)"
    )
    startup_timeout_seconds: float = Field(
        default=120.0, gt=0, description="how long the env server may take to start"
    )

    def python_executable(self) -> str | None:
        """The configured python, else the variable's."""
        return self.python or os.environ.get(PYTHON_VARIABLE) or None

    def verifiers_env(self, taskset_id: str) -> dict[str, Any]:
        """verifiers' env config data: ``env`` with the taskset's id and settings."""
        return {**self.env, "taskset": {**self.taskset, "id": taskset_id}}
