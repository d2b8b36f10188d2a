"""``agentsgym list-*``: the registered envs, agents, trainers, executors and models."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from agentsgym.cli.terminal import console
from agentsgym.install_hint import README_TABLE
from agentsgym.redaction import redact
from agentsgym.registry import get_registry
from agentsgym.specs import ComponentSpec


def env_listing(verbose: bool = False) -> list[dict[str, Any]]:
    """What ``list-envs --json`` prints: one object per env, then broken plugins.
    ``verbose`` adds plugin hooks, config keys and tools, which builds the envs (an env
    whose class does not import gets ``config_error``)."""
    from agentsgym.cli.describe import config_keys, datasets_and_tools, role_listing

    registry = get_registry()
    plugins = {p.name: p for p in registry.host.plugins}
    keys = (
        "id",
        "distribution",
        "version",
        "entry_point",
        "description",
        "plugin",
        "default_agent",
    )
    items: list[dict[str, Any]] = []
    for spec in sorted(registry.envs.values(), key=lambda s: s.id):
        item: dict[str, Any] = {key: getattr(spec, key) for key in keys}
        if verbose:
            item["hooks"] = plugins[spec.plugin].hooks if spec.plugin in plugins else []
            try:
                item["config"] = config_keys(spec)
                item["roles"] = role_listing(spec)
                item["tools"] = datasets_and_tools(spec)["tools"]
            except Exception as exc:  # noqa: BLE001 - one broken env must not hide the others
                item["config_error"] = f"{type(exc).__name__}: {exc}"
        items.append(item)
    for plugin in registry.host.plugins:
        if not plugin.ok:
            about = ("distribution", "version", "entry_point", "error")
            items.append({"plugin": plugin.name, **{k: getattr(plugin, k) for k in about}})
    return items


def list_envs(
    as_json: bool = typer.Option(False, "--json", help="print a JSON list instead of a table"),
    verbose: bool = typer.Option(
        False,
        "--verbose",
        help="also show each env's config keys (type, default, description), "
        "tools and its plugin's hooks",
    ),
) -> None:
    """List every registered env, and every plugin that failed to load."""
    items = redact(env_listing(verbose=verbose))  # a registered server URL may carry a key
    if as_json:
        typer.echo(json.dumps(items, indent=2))
        return
    # Two columns so that an 80-column terminal keeps ids whole: the providing
    # distribution goes under the id, the entry point under the description.
    table = Table(title="agentsgym environments")
    table.add_column("id / distribution", no_wrap=True)
    table.add_column("description / entry point")
    envs = [item for item in items if "error" not in item]
    broken = [item for item in items if "error" in item]
    whos = []
    for item in envs:
        who = Text(item["id"], style="bold")
        who.append(f"\n{item['distribution']} {item['version'] or ''}".rstrip(), style="cyan")
        whos.append(who)
    widest = max((len(line) for who in whos for line in who.plain.splitlines()), default=0)
    room = console.width - widest - 7  # the description column: the rest, less the borders
    for who, item in zip(whos, envs):
        about = Text(item["description"] or "")
        # An entry point too long for its column breaks after the module, never mid-word.
        entry = item["entry_point"]
        about.append("\n" + (entry.replace(":", ":\n", 1) if len(entry) > room else entry), "dim")
        table.add_row(who, about)
    console.print(table)
    if verbose:
        _print_configs(envs)
    for item in broken:
        console.print(
            f"[bold red]plugin {item['plugin']!r} ({item['distribution']}) failed to load:[/] "
            f"{item['error']}",
            highlight=False,
        )


def _print_configs(items: list[dict[str, Any]]) -> None:
    """One table of config keys per env (too wide for a column of the main table)."""
    from agentsgym.cli.describe import config_table, tools_text

    for item in items:
        if "config_error" in item:
            console.print(
                f"[bold]{escape(item['id'])}[/]: [red]config not shown[/]: "
                f"{escape(item['config_error'])}",
                highlight=False,
            )
            continue
        hooks = ", ".join(item.get("hooks", [])) or "none"
        console.print(config_table(item["config"], title=f"{item['id']} env_config"))
        console.print(tools_text(item["tools"]), highlight=False)
        console.print(f"[dim]plugin hooks: {escape(hooks)}[/]", highlight=False)


def _component_table(kind: str, specs: dict[str, ComponentSpec], as_json: bool) -> None:
    rows = [
        {"name": s.name, "distribution": s.distribution, "description": s.description}
        for s in sorted(specs.values(), key=lambda s: s.name)
    ]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title=f"agentsgym {kind}s")
    table.add_column("name", no_wrap=True)
    table.add_column("distribution", no_wrap=True)
    table.add_column("description", overflow="fold")
    for row in rows:
        table.add_row(row["name"], row["distribution"] or "", row["description"])
    console.print(table)
    console.print(
        f"[dim]more {kind}s come with plugin distributions: {README_TABLE} lists ours[/]",
        highlight=False,
    )


def list_agents(as_json: bool = typer.Option(False, "--json")) -> None:
    """List every registered agent."""
    _component_table("agent", get_registry().agents, as_json)


def list_trainers(as_json: bool = typer.Option(False, "--json")) -> None:
    """List every registered trainer adapter."""
    _component_table("trainer", get_registry().trainers, as_json)


def list_executors(as_json: bool = typer.Option(False, "--json")) -> None:
    """List every registered executor (where the trials of a run are played)."""
    _component_table("executor", get_registry().executors, as_json)


def list_models(as_json: bool = typer.Option(False, "--json")) -> None:
    """List every registered model name (what --model and --tokenizer accept)."""
    _component_table("model", get_registry().components["model"], as_json)
