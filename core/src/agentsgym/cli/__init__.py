"""The ``agentsgym`` command line. One module per command; this module wires them.

Library code logs; the CLI owns the terminal (rich tables and progress bars).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.text import Text
from typer.core import TyperGroup

PROG_NAME = "agentsgym"


def show_flags_as_flags(params: list[Any]) -> list[Any]:
    """Give every flag and counter an empty metavar, so that help shows no type for it.

    Why: typer 0.29 fills the rich help's type column with ``display_type_rich()``
    for every option, flags included, so ``--strict-plugins`` read ``<bool>`` and
    ``-v`` read ``<int>`` as if they took a value (typer 0.28 skipped bool types).
    ``display_type_rich()`` returns the metavar when one is set, and a flag never
    shows its metavar anywhere else (usage lines, errors), so an empty one is safe.
    """
    for param in params:
        if (getattr(param, "is_flag", False) or getattr(param, "count", False)) and (
            param.metavar is None
        ):
            param.metavar = ""
    return params


class AgentsGymGroup(TyperGroup):
    """The top-level group: flags shown as flags in the help of every command."""

    def get_params(self, ctx: Any) -> list[Any]:
        return show_flags_as_flags(super().get_params(ctx))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            show_flags_as_flags(command.get_params(ctx))
        return command


app = typer.Typer(
    name=PROG_NAME,
    cls=AgentsGymGroup,
    help="Multi-step text environments as token-exact training data for LLM RL.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
)
console = Console()
err_console = Console(stderr=True)


def _print_version(value: bool) -> None:
    """``--version``: agentsgym's version and the distributions of the loaded plugins."""
    if not value:
        return
    from agentsgym.cli.listing import plugin_versions

    for line in plugin_versions():
        console.print(line, highlight=False)
    raise typer.Exit()


@app.callback()
def _global_options(
    verbose: int = typer.Option(0, "--verbose", "-v", count=True, help="more log output (-vv for debug)"),
    strict_plugins: bool = typer.Option(
        False, "--strict-plugins", help="re-raise when a plugin fails to load (plugin authors)"
    ),
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_print_version,
        help="print the versions of agentsgym and of the installed env plugins, and exit",
    ),
) -> None:
    # datasets' own bars would interleave with ours; the CLI shows its own progress.
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    # transformers advises installing torch on import; envs and tokenizers need none.
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(
        level=level, handlers=[RichHandler(console=err_console, show_path=False)], format="%(message)s"
    )
    if strict_plugins:
        os.environ["AGENTSGYM_STRICT_PLUGINS"] = "1"


# Each command module registers itself on `app` when imported.
from agentsgym.cli import (  # noqa: F401
    atropos,
    check,
    describe,
    evaluate,
    listing,
    new_env,
    rollout,
    serve,
    train,
    view,
)


def main() -> None:
    """Entry point of the ``agentsgym`` script: errors become one readable line."""
    from agentsgym.errors import AgentsGymError

    try:
        # A fixed program name: shell completion keys on it (_AGENTSGYM_COMPLETE),
        # also when run as `python -m agentsgym`.
        app(prog_name=PROG_NAME)
    except AgentsGymError as exc:
        err_console.print(Text.assemble(("error: ", "bold red"), str(exc)), soft_wrap=True)
        raise SystemExit(2) from None
