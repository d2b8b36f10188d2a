"""agentsgym-atropos's plugin: the ``atropos`` command."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentsgym import hookimpl

if TYPE_CHECKING:
    import typer


@hookimpl
def register_commands(cli: typer.Typer) -> None:
    from agentsgym_atropos.commands import atropos_command

    cli.command("atropos", rich_help_panel="Serve and scale")(atropos_command)
