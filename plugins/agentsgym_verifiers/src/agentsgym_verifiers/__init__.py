"""agentsgym-verifiers: PrimeIntellect's verifiers environments as agentsgym envs.

``agentsgym.make("verifiers://TASKSET")`` plays a verifiers v1 taskset on verifiers'
own env server, run in the venv verifiers lives in, with agentsgym's model gateway as
its model endpoint (:class:`VerifiersEnv`). The other way round needs no code here:
``agentsgym serve`` speaks OpenEnv's protocol, which verifiers' built-in ``openenv``
taskset plays (docs/verifiers.md).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["VerifiersBridge", "VerifiersBridgeError", "VerifiersConfig", "VerifiersEnv"]

_LAZY = {
    "VerifiersBridge": "agentsgym_verifiers.bridge",
    "VerifiersBridgeError": "agentsgym_verifiers.bridge",
    "VerifiersConfig": "agentsgym_verifiers.config",
    "VerifiersEnv": "agentsgym_verifiers.env",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentsgym_verifiers' has no attribute {name!r}")
    return getattr(import_module(module), name)
