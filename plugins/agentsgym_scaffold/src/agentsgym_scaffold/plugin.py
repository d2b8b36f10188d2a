"""agentsgym-scaffold's plugin: the ``new-env`` command."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentsgym import hookimpl

if TYPE_CHECKING:
    import typer


@hookimpl
def register_commands(cli: typer.Typer) -> None:
    from agentsgym_scaffold.commands import new_env

    cli.command("new-env", rich_help_panel="Write an env")(new_env)
