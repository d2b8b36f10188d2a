"""agentsgym-gateway: unmodified agent programs as environments.

:class:`ModelGateway` is an OpenAI-compatible server in front of a model backend that
records, per program session, the exact ids of every call; :func:`episode_from_calls`
turns a session's calls into an :class:`agentsgym.Episode`; :class:`HarnessEnv` is
the base of envs whose episodes are programs (docs/harness.md).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = [
    "CallRecord",
    "CallableProgram",
    "CommandProgram",
    "HarnessConfig",
    "HarnessEnv",
    "ModelGateway",
    "ProgramOutcome",
    "ProgramRun",
    "SessionHandle",
    "episode_from_calls",
]

_LAZY = {
    "CallRecord": "agentsgym_gateway.records",
    "CallableProgram": "agentsgym_gateway.programs",
    "CommandProgram": "agentsgym_gateway.programs",
    "HarnessConfig": "agentsgym_gateway.harness",
    "HarnessEnv": "agentsgym_gateway.harness",
    "ModelGateway": "agentsgym_gateway.gateway",
    "ProgramOutcome": "agentsgym_gateway.programs",
    "ProgramRun": "agentsgym_gateway.programs",
    "SessionHandle": "agentsgym_gateway.gateway",
    "episode_from_calls": "agentsgym_gateway.episodes",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentsgym_gateway' has no attribute {name!r}")
    return getattr(import_module(module), name)
