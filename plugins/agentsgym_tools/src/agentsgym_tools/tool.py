"""A tool: a name, the JSON schema the model sees, and the function that runs it.

Plain functions become tools the way transformers' ``get_json_schema`` reads them: the
type hints give the parameter types, the Google-style docstring the descriptions. An
explicit schema (OpenAI's ``{"type": "function", "function": {...}}`` form) is accepted
too, with or without a function behind it (an MCP server's tools are such).

A schema keeps OpenAI's function fields only (:data:`FUNCTION_FIELDS`): they are all an
OpenAI-compatible server keeps of a request's tools and renders into the prompt (vLLM
drops any other key, such as the ``return`` type ``get_json_schema`` adds). With more,
the tools block of a token-in prompt, rendered here, would differ from the one a
chat-mode server renders, and every chat episode's first turn would start a new
segment (measured against vLLM 0.32 in bench/README.md, "Token fidelity against vLLM").
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agentsgym_tools.context import ToolContext
from agentsgym_tools.errors import ToolDeclarationError

__all__ = ["FUNCTION_FIELDS", "Tool", "as_tools", "tool"]

FUNCTION_FIELDS = ("name", "description", "parameters", "strict")
"""The fields of a tool's ``function`` that OpenAI's API (and vLLM's) keeps."""


@dataclass(frozen=True)
class Tool:
    """One tool of an episode. ``function`` is sync or async; it gets the call's
    arguments as keyword arguments and returns anything (text as is, else JSON).

    ``context_parameter``: the function's parameter that receives the episode's
    :class:`~agentsgym_tools.ToolContext`. ``hidden``: the argument names the model may
    not give (that parameter, and what an MCP toolbox injects); neither is in ``schema``.
    """

    name: str
    schema: dict[str, Any]
    function: Callable[..., Any] | None = None
    context_parameter: str | None = None
    hidden: tuple[str, ...] = ()

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
    context_parameter = None if function is None else _context_parameter(function)
    if schema is None:
        if function is None:
            raise ToolDeclarationError("a tool needs a function or a schema")
        schema = _derived_schema(function, context_parameter)
    checked = _checked_schema(schema)
    if name is not None:
        checked["function"]["name"] = name
    shown = checked["function"]["parameters"].get("properties") or {}
    if context_parameter is not None and context_parameter in shown:
        raise ToolDeclarationError(
            f"tool {checked['function']['name']!r}: its schema shows {context_parameter!r}, the "
            "parameter that receives the ToolContext; leave it out of the schema"
        )
    hidden = (context_parameter,) if context_parameter else ()
    return Tool(checked["function"]["name"], checked, function, context_parameter, hidden)


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


def _signature_target(function: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.isfunction(function) or inspect.ismethod(function):
        return function
    return getattr(function, "__call__", function)  # noqa: B004 - a callable object's hints


def _context_parameter(function: Callable[..., Any]) -> str | None:
    """The parameter annotated :class:`ToolContext` (string annotations included)."""
    target = _signature_target(function)
    try:
        parameters = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return None
    try:
        hints = typing.get_type_hints(target)
    except Exception:  # noqa: BLE001 - unresolvable hints: read the annotations as written
        hints = {}
    found = [
        name
        for name, parameter in parameters.items()
        if hints.get(name) is ToolContext
        or parameter.annotation is ToolContext
        or parameter.annotation in ("ToolContext", "agentsgym_tools.ToolContext")
    ]
    if len(found) > 1:
        raise ToolDeclarationError(
            f"tool {getattr(function, '__name__', function)!r} asks for the ToolContext "
            f"twice ({', '.join(found)}); one parameter receives it"
        )
    return found[0] if found else None


def without_parameter(target: Callable[..., Any], hidden: str) -> Callable[..., Any]:
    """A stand-in with ``target``'s hints, docstring and signature, less ``hidden``, for
    transformers' schema derivation (which reads nothing else)."""
    signature = inspect.signature(target)
    hints = {k: v for k, v in typing.get_type_hints(target).items() if k != hidden}

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    stand_in.__name__ = stand_in.__qualname__ = getattr(target, "__name__", "tool")
    stand_in.__doc__ = inspect.getdoc(target)
    stand_in.__annotations__ = hints
    stand_in.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[p for n, p in signature.parameters.items() if n != hidden]
    )
    return stand_in


def _derived_schema(function: Callable[..., Any], hidden: str | None) -> dict[str, Any]:
    from transformers.utils import get_json_schema

    target = _signature_target(function)
    try:
        if hidden is not None:
            target = without_parameter(target, hidden)
        return dict(get_json_schema(target))
    except Exception as exc:  # DocstringParsingException, TypeHintParsingException
        raise ToolDeclarationError(
            f"cannot derive the schema of tool {getattr(function, '__name__', function)!r}: "
            f"{exc}. Give every parameter a type hint and document it in a Google-style "
            "docstring (Args:), or pass an explicit schema: tool(fn, schema={...})"
        ) from exc


def _checked_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """OpenAI's form, its :data:`FUNCTION_FIELDS` only; a bare ``{"name", "parameters"}``
    is wrapped into it."""
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
    kept = {field: function[field] for field in FUNCTION_FIELDS if field in function}
    return {"type": "function", "function": kept}
