"""agentsgym-serve's plugin: the ``serve`` command and the env sources of env servers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentsgym import hookimpl

if TYPE_CHECKING:
    import typer

    from agentsgym.runtime import RegisterEnvSource


@hookimpl
def register_env_sources(register: RegisterEnvSource) -> None:
    for scheme in ("http", "https"):
        register(
            scheme,
            "agentsgym_serve.client:connect",
            description="an `agentsgym serve` server, or one of AgentGym's protocol (asked)",
            normalize="agentsgym_serve.urls:canonical_url",
        )
        register(
            f"agentgym+{scheme}",
            "agentsgym_serve.client:connect",
            description="a server of AgentGym's protocol (/create, /step, ...)",
            normalize="agentsgym_serve.urls:canonical_url",
        )
    for scheme in ("ws", "wss", "http", "https"):
        register(
            f"openenv+{scheme}",
            "agentsgym_serve.openenv_env:OpenEnvEnv",
            description="an OpenEnv server (WebSocket sessions; agentsgym-serve[openenv])",
            normalize="agentsgym_serve.openenv_env:canonical_openenv_url",
        )


@hookimpl
def register_commands(cli: typer.Typer) -> None:
    from agentsgym_serve.commands import serve_command

    cli.command("serve", rich_help_panel="Serve and scale")(serve_command)
