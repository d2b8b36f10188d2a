"""The ``agentsgym`` command line. One module per command; this module wires them.

Library code logs; the CLI owns the terminal (rich tables and progress bars).
"""

from __future__ import annotations

import logging
import os

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.text import Text

app = typer.Typer(
    name="agentsgym",
    help="Multi-step text environments as token-exact training data for LLM RL.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console()
err_console = Console(stderr=True)


@app.callback()
def _global_options(
    verbose: int = typer.Option(0, "--verbose", "-v", count=True, help="more log output (-vv for debug)"),
    strict_plugins: bool = typer.Option(
        False, "--strict-plugins", help="re-raise when a plugin fails to load (plugin authors)"
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
from agentsgym.cli import check, evaluate, listing, rollout, train, view  # noqa: E402,F401


def main() -> None:
    """Entry point of the ``agentsgym`` script: errors become one readable line."""
    from agentsgym.errors import AgentsGymError

    try:
        app()
    except AgentsGymError as exc:
        err_console.print(Text.assemble(("error: ", "bold red"), str(exc)), soft_wrap=True)
        raise SystemExit(2) from None
