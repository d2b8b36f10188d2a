"""``agentsgym new-env NAMESPACE/Name``: write a complete env package to start from."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

import typer
from rich.markup import escape

from agentsgym.cli import console


def new_env(
    name: str = typer.Argument(
        ...,
        metavar="NAMESPACE/Name",
        help="the env to create, e.g. acme/Maze (registered as acme/Maze-v0)",
    ),
    directory: Path | None = typer.Option(  # noqa: B008
        None, "--dir", help="folder to write the package into (default: ./agentsgym-NAMESPACE)"
    ),
    tools: bool = typer.Option(
        False,
        "--tools",
        help="a tool env: agentsgym-tools' ToolEnv with an example tool, and a tool-calling solver",
    ),
    harness: bool = typer.Option(
        False,
        "--harness",
        help="a harness env: agentsgym-gateway's HarnessEnv running an unmodified program (a "
        "plain openai client loop) and a verifier of its answer",
    ),
) -> None:
    """Write an installable env package: pyproject, env with every hook, agent, datasets, tests.

    It passes `agentsgym check-env` and its own tests as written; replace the example
    game in its env.py and keep the shapes. With --tools the env declares Python
    functions as tools the model calls (it depends on agentsgym-tools). With --harness
    the env runs an agent program whose model calls the gateway records, and scores its
    final state (it depends on agentsgym-gateway and openai).
    """
    from agentsgym_scaffold.writer import KINDS, clone_install, kind_name, write_package

    names, root, written = write_package(name, directory, tools=tools, harness=harness)
    console.print(
        f"[bold green]wrote {names.distribution}[/] ({len(written)} files) into "
        f"{escape(str(root))}: env [bold]{escape(names.env_id)}[/], default agent "
        f"{escape(names.agent_name)}",
        highlight=False,
    )
    for path in written:
        console.print(f"  {escape(str(path.relative_to(root)))}", highlight=False)
    needs = KINDS[kind_name(tools=tools, harness=harness)].needs
    missing = tuple(d for d in needs if find_spec(d.replace("-", "_")) is None)
    # the steps in the order they work: what the package depends on (from a clone of
    # agentsgym, whose distributions are on no package index) before the package itself
    first = f"  {clone_install(missing)}   # in a clone of agentsgym\n" if missing else ""
    console.print(
        "next:\n"
        f"{first}"
        f"  pip install -e {escape(repr(str(root) + '[test]'))}\n"
        f"  agentsgym check-env {escape(names.env_id)}\n"
        f"  pytest {escape(str(root / 'tests'))}",
        highlight=False,
        soft_wrap=True,
    )
    if missing:
        console.print(
            f"note: {escape(names.distribution)} depends on {', '.join(missing)}, not "
            "installed here: the first line installs it from a clone of agentsgym (its "
            "distributions are on no package index)",
            highlight=False,
            soft_wrap=True,
        )
