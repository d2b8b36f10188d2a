"""``agentsgym describe ENV_ID``: one env's docs, config keys, datasets, tools and agent.
The config keys come from the env's pydantic config class, so an env documents its
settings by declaring them (``list-envs --verbose`` shows them for every env)."""

from __future__ import annotations

import inspect
import json
import types
from typing import Any, Literal, Union, get_args, get_origin

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined, to_jsonable_python
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from agentsgym.cli.docstrings import plain_docstring
from agentsgym.cli.options import complete_env_id
from agentsgym.cli.terminal import console, err_console
from agentsgym.engine import EPISODE_HOOK_NAMES, toolbox_now
from agentsgym.factory import make
from agentsgym.redaction import redact, redact_text
from agentsgym.registry import EnvSpec, env_class, get_registry


def config_keys(spec: EnvSpec) -> list[dict[str, Any]]:
    """The env_config keys of ``spec``'s config class as users see them, with the id's
    effective defaults (``registered``: the id registers its own, ``register(..., key=v)``)."""
    config_class = env_class(spec).config_class
    keys = []
    for name, info in config_class.model_fields.items():
        registered = name in spec.default_env_config
        if registered:
            default, required = spec.default_env_config[name], False
        elif info.is_required():
            default, required = None, True
        else:
            default, required = info.get_default(call_default_factory=True), False
        keys.append(
            {
                "key": name,
                "type": type_name(info.annotation),
                "default": _jsonable(default),
                "required": required,
                "registered": registered,
                "constraints": _constraints(info),
                "description": info.description or _inherited_description(config_class, name),
            }
        )
    return keys


def _inherited_description(config_class: type[BaseModel], name: str) -> str:
    """The description of ``name`` in a base config, when a subclass redefines the key
    (``max_steps_per_episode: int = 8``) without one."""
    for base in config_class.__mro__[1:]:
        fields = getattr(base, "model_fields", None)
        if isinstance(fields, dict) and name in fields and fields[name].description:
            return fields[name].description
    return ""


def type_name(annotation: Any) -> str:
    """``int``, ``float | None``, ``'spread' | 'last_token'``, ``dict[str, Any]``."""
    if annotation is None or annotation is type(None):
        return "None"
    origin = get_origin(annotation)
    if origin is Literal:
        return " | ".join(repr(a) for a in get_args(annotation))
    if origin in (Union, types.UnionType):
        return " | ".join(type_name(a) for a in get_args(annotation))
    if origin is not None:
        args = ", ".join(type_name(a) for a in get_args(annotation))
        base = getattr(origin, "__name__", str(origin))
        return f"{base}[{args}]" if args else base
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


_CONSTRAINT_SYMBOLS = {
    "ge": ">=",
    "gt": ">",
    "le": "<=",
    "lt": "<",
    "min_length": "min length",
    "max_length": "max length",
    "multiple_of": "multiple of",
}


def _constraints(info: FieldInfo) -> list[str]:
    found = []
    for item in info.metadata:
        for attr, symbol in _CONSTRAINT_SYMBOLS.items():
            value = getattr(item, attr, None)
            if value is not None:
                found.append(f"{symbol} {value}")
    return found


def _jsonable(value: Any) -> Any:
    if value is PydanticUndefined:
        return None
    try:
        return to_jsonable_python(value)
    except Exception:  # noqa: BLE001 - an exotic default: show it as text, not fail the listing
        return repr(value)


def env_description(spec: EnvSpec) -> dict[str, Any]:
    """What ``describe --json`` prints for one env."""
    registry = get_registry()
    cls = env_class(spec)
    own_doc = cls.__dict__.get("__doc__")  # not MultistepEnv's, when the env has none
    agent = registry.agents.get(spec.default_agent or "")
    return {
        "id": spec.id,
        "description": spec.description,
        "distribution": spec.distribution,
        "version": spec.version,
        "entry_point": spec.entry_point,
        "docs": plain_docstring(inspect.cleandoc(own_doc)) if own_doc else "",
        "default_agent": spec.default_agent,
        "default_agent_description": agent.description if agent else None,
        "registered_env_config": _jsonable(spec.default_env_config),
        "config": config_keys(spec),
        "hooks": [h for h in EPISODE_HOOK_NAMES if hasattr(cls, h)],
        "roles": role_listing(spec),
        **datasets_and_tools(spec),
    }


def role_listing(spec: EnvSpec) -> list[dict[str, Any]]:
    """The env's declared roles as ``describe --json`` and ``list-envs --json --verbose``
    print them (empty for a single-agent env)."""
    return [
        {
            "name": role.name,
            "trainable": role.trainable,
            "description": role.description,
            "default_agent": role.default_agent,
        }
        for role in env_class(spec).roles
    ]


def datasets_and_tools(spec: EnvSpec) -> dict[str, Any]:
    """``datasets``: each split's size and first task; ``tools``: the name and description
    of each tool of an episode of that task (tools may differ per task), else an error."""
    try:
        env = make(spec.id)
    except Exception as exc:  # noqa: BLE001 - the env's own code: describe shows what broke
        error = f"the env does not build: {type(exc).__name__}: {exc}"
        return {"datasets": {"error": error}, "tools": {"error": error}}
    found: dict[str, Any] = {}
    for split, getter in (("train", env.get_train_dataset), ("eval", env.get_eval_dataset)):
        try:
            dataset = getter()
        except NotImplementedError:
            found[split] = None
            continue
        except Exception as exc:  # noqa: BLE001 - as above
            found[split] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        sample = dataset[0]["task_data"] if len(dataset) else None
        if isinstance(sample, str):  # JSON column read back as text
            sample = json.loads(sample)
        found[split] = {"size": len(dataset), "sample_task": sample}
    sample = next((v["sample_task"] for v in found.values() if v and v.get("sample_task")), {})
    try:
        toolbox = toolbox_now(env, sample)
        functions = [s.get("function", s) for s in (toolbox.schemas if toolbox else [])]
        tools = [
            {
                "name": f.get("name"),
                "description": f.get("description", ""),
                "parameters": f.get("parameters"),
            }
            for f in functions
        ]
    except Exception as exc:  # noqa: BLE001 - as above (a malformed schema included)
        return {"datasets": found, "tools": {"error": f"{type(exc).__name__}: {exc}"}}
    return {"datasets": found, "tools": tools}


def describe(
    env_id: str = typer.Argument(
        ..., help="registered env id (see `agentsgym list-envs`)", autocompletion=complete_env_id
    ),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of tables"),
) -> None:
    """Show one env: its docs, config keys (types, defaults), datasets and default agent."""
    spec = get_registry().resolve(env_id)
    try:
        env_class(spec)
    except Exception as exc:  # noqa: BLE001 - the plugin's code: show what broke, not a traceback
        err_console.print(
            f"[bold red]error:[/] {escape(redact_text(spec.id))}'s class "
            f"{escape(redact_text(spec.entry_point))} does not "
            f"import: {escape(f'{type(exc).__name__}: {exc}')} (from "
            f"{escape(str(spec.distribution))}; run with --strict-plugins -vv for details)",
            highlight=False,
        )
        raise typer.Exit(1) from None
    # an env registered with a server URL may carry its key: shown, never printed
    item = redact(env_description(spec))
    if as_json:
        typer.echo(json.dumps(item, indent=2))
        return
    version = f" {item['version']}" if item["version"] else ""
    console.print(f"[bold]{escape(item['id'])}[/]  {escape(item['description'])}", highlight=False)
    console.print(
        f"[cyan]{escape(item['distribution'] or '?')}{escape(version)}[/]  "
        f"[dim]{escape(item['entry_point'])}[/]",
        highlight=False,
    )
    if item["docs"]:
        console.print()
        console.print(escape(item["docs"]), highlight=False)
    console.print()
    console.print(config_table(item["config"], title="env_config (--env-config key=value)"))
    if item["registered_env_config"]:
        registered = ", ".join(
            f"{k}={json.dumps(v)}" for k, v in item["registered_env_config"].items()
        )
        console.print(f"registered for this id: {escape(registered)}", highlight=False)
    console.print(datasets_table(item["datasets"]))
    console.print(tools_text(item["tools"]), highlight=False)
    console.print(default_agent_text(item), highlight=False)
    if item["roles"]:
        console.print(roles_text(item["roles"]), highlight=False)
    console.print(f"episode hooks: {', '.join(item['hooks'])}", highlight=False)


def default_agent_text(item: dict[str, Any]) -> str:
    """``default agent: NAME: its description``, else what plays the env when no agent
    is named: each role's own default agent, or what to give."""
    if item["default_agent"]:
        about = item["default_agent_description"]
        about = f": {about}" if about else ""
        return f"default agent: [bold]{escape(item['default_agent'])}[/]{escape(about)}"
    without = [role["name"] for role in item["roles"] if not role["default_agent"]]
    if item["roles"] and not without:
        return "default agent: none needed, each role plays with its own (below)"
    if item["roles"]:
        return (
            f"default agent: none (give --agent, or --agent ROLE=NAME for "
            f"{escape(', '.join(without))})"
        )
    return "default agent: none (give --agent)"


def roles_text(roles: list[dict[str, Any]]) -> str:
    """``roles (--agent ROLE=NAME):`` then a line per role: its description, whether it
    trains, and the agent it plays with when none is named (``Role.default_agent``)."""
    lines = ["roles (--agent ROLE=NAME):"]
    for role in roles:
        facts = [role["description"]] if role["description"] else []
        facts += [] if role["trainable"] else ["not trained"]
        if role["default_agent"]:
            facts.append(f"default agent {role['default_agent']}")
        about = f": {'; '.join(facts)}" if facts else ""
        lines.append(f"  [bold]{escape(role['name'])}[/]{escape(about)}")
    return "\n".join(lines)


def config_table(keys: list[dict[str, Any]], *, title: str | None = None) -> Table:
    """A rich table of config keys: key and type, default, description."""
    table = Table(title=title, title_justify="left")
    table.add_column("key / type", no_wrap=True)
    table.add_column("default", overflow="fold", max_width=16)
    table.add_column("description", overflow="fold", ratio=1)
    for key in keys:
        kind = key["type"] + (f" ({', '.join(key['constraints'])})" if key["constraints"] else "")
        default = "(required)" if key["required"] else json.dumps(key["default"])
        if key["registered"]:
            default += " *"
        name = Text(key["key"], style="bold")
        name.append(f"\n{kind}", style="dim")
        table.add_row(name, default, key["description"])
    if any(key["registered"] for key in keys):
        table.caption = "* registered default of this id"
    return table


def tools_text(tools: list[dict[str, Any]] | dict[str, str]) -> str:
    """``tools:`` then ``  name(argument, ...): description`` per tool, for describe and
    ``list-envs --verbose``."""
    if isinstance(tools, dict):
        return f"tools: not shown: {escape(tools['error'])}"
    lines = ["tools:" + ("" if tools else " none")]
    for tool in tools:
        arguments = ", ".join((tool["parameters"] or {}).get("properties") or {})
        lines.append(
            f"  [bold]{escape(str(tool['name']))}[/]({escape(arguments)}): "
            f"{escape(tool['description'])}"
        )
    return "\n".join(lines)


def datasets_table(found: dict[str, Any]) -> Table:
    table = Table(title="datasets", title_justify="left")
    table.add_column("split", no_wrap=True)
    table.add_column("tasks", justify="right")
    table.add_column("sample task_data", overflow="fold")
    if "error" in found:
        table.add_row("-", "-", escape(found["error"]))
        return table
    for split, info in found.items():
        if info is None:
            table.add_row(split, "-", "(none)")
        elif "error" in info:
            table.add_row(split, "-", escape(f"error: {info['error']}"))
        else:
            table.add_row(split, str(info["size"]), escape(json.dumps(info["sample_task"])))
    return table
