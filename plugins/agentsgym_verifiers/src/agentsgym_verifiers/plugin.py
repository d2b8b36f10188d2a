"""agentsgym-verifiers' plugin: the ``verifiers://`` env source."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentsgym import hookimpl

if TYPE_CHECKING:
    from agentsgym.runtime import RegisterEnvSource


@hookimpl
def register_env_sources(register: RegisterEnvSource) -> None:
    register(
        "verifiers",
        "agentsgym_verifiers.env:VerifiersEnv",
        description="a verifiers v1 taskset, played on verifiers' own env server (0.4.0)",
        normalize="agentsgym_verifiers.urls:canonical_url",
    )
