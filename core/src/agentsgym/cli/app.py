"""The ``agentsgym`` application, built from the commands every loaded plugin registers
(``register_commands``; the core's own come from its built-in plugin like any other's)."""

from __future__ import annotations

import difflib
import logging
import os
import sys
from importlib.metadata import PackageNotFoundError, distributions, version
from typing import Any

import typer
from rich.logging import RichHandler
from rich.text import Text
from typer.core import TyperGroup

from agentsgym.cli.executor_flags import add_executor_flags
from agentsgym.cli.terminal import console, err_console
from agentsgym.errors import AgentsGymError, MissingPluginError
from agentsgym.install_hint import not_installed_hint
from agentsgym.output import RedactingFilter, redact_text
from agentsgym.plugins import ENTRY_POINT_GROUP, load_plugins

PROG_NAME = "agentsgym"


def show_flags_as_flags(params: list[Any]) -> list[Any]:
    """Give every flag and counter an empty metavar: typer 0.29's rich help shows a type
    for every option that has none (``--strict-plugins <bool>``, as if it took a value),
    and a flag's metavar shows nowhere else."""
    for param in params:
        is_flag = getattr(param, "is_flag", False) or getattr(param, "count", False)
        if is_flag and param.metavar is None:
            param.metavar = ""
    return params


HELP_PANELS = ("Play", "Train", "Look around", "Write an env", "Serve and scale")
"""The sections of --help, in this order; a command names its own (``rich_help_panel``),
and commands of a section keep the order in which plugins registered them (the core's
built-in plugin first). A command in another section, or in none, comes after these."""


class AgentsGymGroup(TyperGroup):
    """The top-level group: commands in a useful order, flags shown as flags, and a
    command that no loaded plugin registered answered with where commands come from."""

    def list_commands(self, ctx: Any) -> list[str]:
        rank = {panel: index for index, panel in enumerate(HELP_PANELS)}

        def section(name: str) -> int:
            panel = getattr(self.commands[name], "rich_help_panel", None)
            return rank.get(panel, len(rank))

        return sorted(super().list_commands(ctx), key=section)

    def get_params(self, ctx: Any) -> list[Any]:
        return show_flags_as_flags(super().get_params(ctx))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            add_executor_flags(command)
            show_flags_as_flags(command.get_params(ctx))
        elif not ctx.resilient_parsing:
            close = difflib.get_close_matches(cmd_name, list(self.commands), n=1, cutoff=0.6)
            typo = f" (did you mean `agentsgym {close[0]}`?)" if close else ""
            raise MissingPluginError(
                f"no command `agentsgym {cmd_name}` is installed{typo}."
                f"{not_installed_hint('command')}"
            )
        return command


def _print_version(value: bool) -> None:
    """``--version``: agentsgym and every installed distribution with an ``agentsgym``
    entry point, with the plugins each provides and any that failed to load."""
    if not value:
        return
    try:
        own = version("agentsgym")
    except PackageNotFoundError:  # a source checkout that was never installed
        own = "(not installed)"
    failed = {p.name: p.error for p in load_plugins().plugins if not p.ok}
    found: dict[str, str] = {}
    for dist in distributions():
        name = dist.metadata["Name"]
        plugins = sorted(ep.name for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP)
        if not name or not plugins or name in found:
            continue
        line = f"{name} {dist.version} (plugin {', '.join(plugins)})"
        errors = [str(failed[p]) for p in plugins if p in failed]
        found[name] = line + (f": failed to load: {'; '.join(errors)}" if errors else "")
    lines = [found[name] for name in sorted(found)] or ["no plugin distributions installed"]
    for line in [f"agentsgym {own}", *lines]:
        console.print(line, highlight=False, soft_wrap=True)
    raise typer.Exit()


def _configure_logging(verbose: int) -> None:
    root = logging.getLogger()
    if not any(isinstance(h, RichHandler) for h in root.handlers):
        handler = RichHandler(console=err_console, show_path=False)
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler.addFilter(RedactingFilter())
        root.addHandler(handler)
    root.setLevel(logging.WARNING - 10 * min(verbose, 2))


def _global_options(
    verbose: int = typer.Option(
        0, "--verbose", "-v", count=True, help="more log output (-vv for debug)"
    ),
    strict_plugins: bool = typer.Option(
        False, "--strict-plugins", help="re-raise when a plugin fails to load (plugin authors)"
    ),
    version: bool = typer.Option(
        False,
        "--version",
        is_eager=True,
        callback=_print_version,
        help="print the versions of agentsgym and of every installed agentsgym distribution, "
        "and exit",
    ),
) -> None:
    _configure_logging(verbose)


def build_app() -> typer.Typer:
    """The application with the commands of every loaded plugin; a plugin whose
    ``register_commands`` raises is recorded (``list-envs`` shows it), the others work."""
    app = typer.Typer(
        name=PROG_NAME,
        cls=AgentsGymGroup,
        help="Multi-step text environments as token-exact training data for LLM RL.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=True,
    )
    app.callback()(_global_options)
    load_plugins().call_each("register_commands", lambda info: {"cli": app})
    return app


def main() -> None:
    """Entry point of the ``agentsgym`` script: errors become one readable line."""
    # Plugins load before the arguments are parsed (they add the commands), so the
    # options that govern loading are read here.
    if "--strict-plugins" in sys.argv[1:]:
        os.environ["AGENTSGYM_STRICT_PLUGINS"] = "1"
    # datasets' own bars would interleave with ours; the CLI shows its own progress.
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    # transformers advises installing torch on import; envs and tokenizers need none.
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    _configure_logging(0)
    try:
        # A fixed program name: shell completion keys on it (_AGENTSGYM_COMPLETE),
        # also when run as `python -m agentsgym`.
        build_app()(prog_name=PROG_NAME)
    except AgentsGymError as exc:
        message = redact_text(str(exc))
        err_console.print(Text.assemble(("error: ", "bold red"), message), soft_wrap=True)
        raise SystemExit(2) from None
