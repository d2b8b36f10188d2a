"""``agentsgym list-envs`` / ``list-agents`` / ``list-trainers``."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.table import Table
from rich.text import Text

from agentsgym.cli import app, console
from agentsgym.registry import ComponentSpec, get_registry


def env_listing(verbose: bool = False) -> list[dict[str, Any]]:
    """What ``list-envs --json`` prints: one object per env, then broken plugins."""
    registry = get_registry()
    plugins = {p.name: p for p in registry.host.plugins}
    items: list[dict[str, Any]] = []
    for spec in sorted(registry.envs.values(), key=lambda s: s.id):
        item: dict[str, Any] = {
            "id": spec.id,
            "distribution": spec.distribution,
            "version": spec.version,
            "entry_point": spec.entry_point,
            "description": spec.description,
            "plugin": spec.plugin,
            "default_agent": spec.default_agent,
        }
        if verbose and spec.plugin in plugins:
            item["hooks"] = plugins[spec.plugin].hooks
        items.append(item)
    for plugin in registry.host.plugins:
        if not plugin.ok:
            items.append(
                {
                    "plugin": plugin.name,
                    "distribution": plugin.distribution,
                    "version": plugin.version,
                    "entry_point": plugin.entry_point,
                    "error": plugin.error,
                }
            )
    return items


@app.command("list-envs")
def list_envs(
    as_json: bool = typer.Option(False, "--json", help="print a JSON list instead of a table"),
    verbose: bool = typer.Option(False, "--verbose", help="also list each plugin's hooks"),
) -> None:
    """List every registered env, and every plugin that failed to load."""
    items = env_listing(verbose=verbose)
    if as_json:
        typer.echo(json.dumps(items, indent=2))
        return
    # Two columns so that an 80-column terminal keeps ids whole: the providing
    # distribution goes under the id, the entry point under the description.
    table = Table(title="agentsgym environments")
    table.add_column("id / distribution", no_wrap=True)
    table.add_column("description / entry point", overflow="fold")
    if verbose:
        table.add_column("hooks", overflow="fold")
    broken = []
    for item in items:
        if "error" in item:
            broken.append(item)
            continue
        who = Text(item["id"], style="bold")
        who.append(f"\n{item['distribution']} {item['version'] or ''}".rstrip(), style="cyan")
        about = Text(item["description"] or "")
        about.append(f"\n{item['entry_point']}", style="dim")
        row: list[Text | str] = [who, about]
        if verbose:
            row.append(", ".join(item.get("hooks", [])))
        table.add_row(*row)
    console.print(table)
    for item in broken:
        console.print(
            f"[bold red]plugin {item['plugin']!r} ({item['distribution']}) failed to load:[/] "
            f"{item['error']}",
            highlight=False,
        )


def _component_table(title: str, specs: dict[str, ComponentSpec], as_json: bool) -> None:
    rows = [
        {"name": s.name, "distribution": s.distribution, "description": s.description}
        for s in sorted(specs.values(), key=lambda s: s.name)
    ]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title=title)
    for column in ("name", "distribution", "description"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(row["name"], row["distribution"] or "", row["description"])
    console.print(table)


@app.command("list-agents")
def list_agents(as_json: bool = typer.Option(False, "--json")) -> None:
    """List every registered agent."""
    _component_table("agentsgym agents", get_registry().agents, as_json)


@app.command("list-trainers")
def list_trainers(as_json: bool = typer.Option(False, "--json")) -> None:
    """List every registered trainer adapter."""
    _component_table("agentsgym trainers", get_registry().trainers, as_json)
