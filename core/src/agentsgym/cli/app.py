"""The ``agentsgym`` application: built from the commands every plugin registers.

:func:`build_app` makes the Typer application and calls each loaded plugin's
``register_commands`` hook with it (the core's commands come from its built-in
plugin, like any other plugin's); :func:`main` is the console script.
"""

from __future__ import annotations

import logging
import os
import sys
from importlib.metadata import PackageNotFoundError, distributions, version
from typing import Any

import typer
from rich.logging import RichHandler
from rich.text import Text
from typer.core import TyperGroup

from agentsgym.cli.terminal import console, err_console
from agentsgym.errors import AgentsGymError, MissingPluginError
from agentsgym.plugins import ENTRY_POINT_GROUP, PluginHost, load_plugins
from agentsgym.satellites import provider_hint

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
    """The top-level group: flags shown as flags, and a command of a plugin that is
    not installed answered with the package to install."""

    def get_params(self, ctx: Any) -> list[Any]:
        return show_flags_as_flags(super().get_params(ctx))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            show_flags_as_flags(command.get_params(ctx))
        elif not ctx.resilient_parsing and provider_hint("command", cmd_name):
            raise MissingPluginError(
                f"`agentsgym {cmd_name}` is a plugin's command.{provider_hint('command', cmd_name)}"
            )
        return command


def installed_plugin_distributions() -> list[tuple[str, str, list[str]]]:
    """(name, version, entry-point names) of every installed distribution that
    registers an ``agentsgym`` entry point (env packages and satellites), sorted."""
    found: dict[str, tuple[str, str, list[str]]] = {}
    for dist in distributions():
        name = dist.metadata["Name"]
        plugins = sorted(ep.name for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP)
        if name and plugins and name not in found:
            found[name] = (name, dist.version, plugins)
    return [found[name] for name in sorted(found)]


def _print_version(value: bool) -> None:
    """``--version``: agentsgym and every installed agentsgym distribution, with the
    plugins each provides and any that failed to load."""
    if not value:
        return
    try:
        own = version("agentsgym")
    except PackageNotFoundError:  # a source checkout that was never installed
        own = "(not installed)"
    failed = {p.name: p.error for p in load_plugins().plugins if not p.ok}
    lines = [f"agentsgym {own}"]
    for name, ver, plugins in installed_plugin_distributions():
        line = f"{name} {ver} (plugin {', '.join(plugins)})"
        errors = [f"{failed[p]}" for p in plugins if p in failed]
        lines.append(line + (f": failed to load: {'; '.join(errors)}" if errors else ""))
    if len(lines) == 1:
        lines.append("no plugin distributions installed")
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)
    raise typer.Exit()


def _configure_logging(verbose: int) -> None:
    root = logging.getLogger()
    if not any(isinstance(h, RichHandler) for h in root.handlers):
        handler = RichHandler(console=err_console, show_path=False)
        handler.setFormatter(logging.Formatter("%(message)s"))
        root.addHandler(handler)
    root.setLevel(logging.WARNING - 10 * min(verbose, 2))


def _global_options(
    verbose: int = typer.Option(0, "--verbose", "-v", count=True, help="more log output (-vv for debug)"),
    strict_plugins: bool = typer.Option(
        False, "--strict-plugins", help="re-raise when a plugin fails to load (plugin authors)"
    ),
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_print_version,
        help="print the versions of agentsgym and of every installed agentsgym distribution, "
        "and exit",
    ),
) -> None:
    _configure_logging(verbose)


def add_plugin_commands(app: typer.Typer, host: PluginHost) -> None:
    """Call every loaded plugin's ``register_commands``; one that raises is recorded
    (and shown by ``list-envs``) while the others' commands keep working."""
    for info in host.plugins:
        if info.ok and "register_commands" in info.hooks:
            try:
                info.module.register_commands(cli=app)  # type: ignore[union-attr]
            except Exception as exc:
                host.record_failure(info, exc)


def build_app() -> typer.Typer:
    """The application with the commands of every loaded plugin."""
    app = typer.Typer(
        name=PROG_NAME,
        cls=AgentsGymGroup,
        help="Multi-step text environments as token-exact training data for LLM RL.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=True,
    )
    app.callback()(_global_options)
    add_plugin_commands(app, load_plugins())
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
        err_console.print(Text.assemble(("error: ", "bold red"), str(exc)), soft_wrap=True)
        raise SystemExit(2) from None
