"""A tool: a name, the JSON schema the model sees, and the function that runs it.

Plain functions become tools the way transformers' ``get_json_schema`` reads them: the
type hints give the parameter types, the Google-style docstring the descriptions. An
explicit schema (OpenAI's ``{"type": "function", "function": {...}}`` form) is accepted
too, with or without a function behind it (an MCP server's tools are such).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agentsgym_tools.errors import ToolDeclarationError

__all__ = ["Tool", "as_tools", "tool"]


@dataclass(frozen=True)
class Tool:
    """One tool of an episode. ``function`` is sync or async; it gets the call's
    arguments as keyword arguments and returns anything (text as is, else JSON)."""

    name: str
    schema: dict[str, Any]
    function: Callable[..., Any] | None = None

    @property
    def parameters(self) -> dict[str, Any]:
        return dict(self.schema["function"].get("parameters") or {})


def tool(
    function: Callable[..., Any] | None = None,
    *,
    schema: Mapping[str, Any] | None = None,
    name: str | None = None,
) -> Tool:
    """A :class:`Tool` from a function (schema derived from its hints and docstring) or
    from an explicit ``schema``; ``name`` renames it."""
    if schema is None:
        if function is None:
            raise ToolDeclarationError("a tool needs a function or a schema")
        schema = _derived_schema(function)
    checked = _checked_schema(schema)
    if name is not None:
        checked["function"]["name"] = name
    return Tool(name=checked["function"]["name"], schema=checked, function=function)


def as_tools(declared: Iterable[Tool | Callable[..., Any] | Mapping[str, Any]]) -> list[Tool]:
    """Tools from what an env declares: tools, functions or explicit schemas; names unique."""
    tools: list[Tool] = []
    for item in declared:
        if isinstance(item, Tool):
            tools.append(item)
        elif isinstance(item, Mapping):
            tools.append(tool(schema=item))
        elif callable(item):
            tools.append(tool(item))
        else:
            raise ToolDeclarationError(
                f"cannot make a tool of {item!r:.80}: give a function, a Tool or a JSON schema"
            )
    names = [t.name for t in tools]
    doubled = sorted({n for n in names if names.count(n) > 1})
    if doubled:
        raise ToolDeclarationError(f"two tools are named {', '.join(doubled)}; names must differ")
    return tools


def _derived_schema(function: Callable[..., Any]) -> dict[str, Any]:
    from transformers.utils import get_json_schema

    target = function if inspect.isfunction(function) or inspect.ismethod(function) else None
    if target is None:  # a callable object: its __call__ carries the hints
        target = getattr(function, "__call__", function)  # noqa: B004
    try:
        return dict(get_json_schema(target))
    except Exception as exc:  # DocstringParsingException, TypeHintParsingException
        raise ToolDeclarationError(
            f"cannot derive the schema of tool {getattr(function, '__name__', function)!r}: "
            f"{exc}. Give every parameter a type hint and document it in a Google-style "
            "docstring (Args:), or pass an explicit schema: tool(fn, schema={...})"
        ) from exc


def _checked_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """OpenAI's form; a bare ``{"name", "parameters"}`` is wrapped into it."""
    wrapped = dict(schema) if "function" in schema else {"type": "function", "function": schema}
    function = dict(wrapped.get("function") or {})
    name = function.get("name")
    if wrapped.get("type", "function") != "function" or not isinstance(name, str) or not name:
        raise ToolDeclarationError(
            f"a tool schema must be {{'type': 'function', 'function': {{'name': ..., "
            f"'parameters': {{...}}}}}}; got {dict(schema)!r:.120}"
        )
    parameters = function.get("parameters", {"type": "object", "properties": {}})
    if not isinstance(parameters, Mapping) or parameters.get("type", "object") != "object":
        raise ToolDeclarationError(
            f"tool {name!r}: parameters must be a JSON schema of type 'object'"
        )
    function["parameters"] = dict(parameters)
    return {"type": "function", "function": function}
