"""agentsgym-eval's plugin: the ``eval`` command."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentsgym import hookimpl

if TYPE_CHECKING:
    import typer


@hookimpl
def register_commands(cli: typer.Typer) -> None:
    from agentsgym_eval.commands import eval_command

    cli.command("eval", rich_help_panel="Play")(eval_command)
