"""agentsgym-viewer's plugin: the ``view`` command."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentsgym import hookimpl

if TYPE_CHECKING:
    import typer


@hookimpl
def register_commands(cli: typer.Typer) -> None:
    from agentsgym_viewer.commands import view

    cli.command("view", rich_help_panel="Look around")(view)
