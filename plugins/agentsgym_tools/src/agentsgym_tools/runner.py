"""ToolRunner: the calls of one reply, run concurrently, each under a timeout, each
answered by a ``tool`` message; what goes wrong is said in that message, never raised."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Sequence
from typing import Any

from agentsgym.redaction import redact_text
from agentsgym.types import Messages
from agentsgym_tools.tool import Tool

__all__ = ["ToolRunner", "tool_message"]

logger = logging.getLogger(__name__)

ERROR_PREFIX = "Error: "


def tool_message(call_id: str, name: str, content: str) -> dict[str, Any]:
    """A ``tool`` message answering call ``call_id`` of tool ``name``."""
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


class ToolRunner:
    """Runs tool calls against ``tools``.

    :param timeout_seconds: each call's budget; a sync function that overruns keeps its
        worker thread until it returns (Python cannot stop a thread), its answer is dropped.
    :param max_calls: calls answered per reply; the rest are answered with an error.
    """

    def __init__(
        self, tools: Sequence[Tool], *, timeout_seconds: float = 30.0, max_calls: int = 8
    ) -> None:
        self.tools = {t.name: t for t in tools}
        self.timeout_seconds = timeout_seconds
        self.max_calls = max_calls

    async def run(self, calls: Sequence[dict[str, Any]]) -> Messages:
        """One ``tool`` message per call, in the order of the calls."""
        answers = await asyncio.gather(
            *(self._answer(index, call) for index, call in enumerate(calls))
        )
        return [tool_message(call_id, name, text) for call_id, name, text in answers]

    async def _answer(self, index: int, call: dict[str, Any]) -> tuple[str, str, str]:
        function = call.get("function") or {}
        name = str(function.get("name", ""))
        call_id = str(call.get("id") or f"call_{index}")
        if index >= self.max_calls:
            return (
                call_id,
                name,
                _error(f"not run: at most {self.max_calls} tool calls are answered per turn"),
            )
        return call_id, name, await self._run_one(name, function.get("arguments", {}))

    async def _run_one(self, name: str, arguments: Any) -> str:
        tool = self.tools.get(name)
        if tool is None or tool.function is None:
            known = ", ".join(sorted(self.tools)) or "none"
            return _error(f"there is no tool named {name!r}; the tools are: {known}")
        if not isinstance(arguments, dict):
            return _error(f"the arguments of {name} must be a JSON object, not {arguments!r:.80}")
        problem = _binding_problem(tool, arguments)
        if problem:
            return _error(problem)
        try:
            result = await asyncio.wait_for(self._call(tool, arguments), self.timeout_seconds)
        except asyncio.TimeoutError:
            return _error(f"{name} did not finish within {self.timeout_seconds:g} seconds")
        except Exception as exc:
            logger.debug("tool %s raised", name, exc_info=True)
            return _error(redact_text(f"{name} raised {type(exc).__name__}: {exc}"))
        return as_text(result)

    @staticmethod
    async def _call(tool: Tool, arguments: dict[str, Any]) -> Any:
        assert tool.function is not None
        if inspect.iscoroutinefunction(tool.function) or inspect.iscoroutinefunction(
            getattr(tool.function, "__call__", None)  # noqa: B004
        ):
            return await tool.function(**arguments)
        result = await asyncio.to_thread(tool.function, **arguments)
        return await result if inspect.isawaitable(result) else result


def as_text(result: Any) -> str:
    """What a tool returned, as the text of its message: text as is, else JSON."""
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(result)


def _binding_problem(tool: Tool, arguments: dict[str, Any]) -> str | None:
    """Why these arguments do not fit the tool (a function's signature, else its schema)."""
    assert tool.function is not None
    try:
        signature = inspect.signature(tool.function)
    except (TypeError, ValueError):
        signature = None
    if signature is not None:
        try:
            signature.bind(**arguments)
        except TypeError as exc:
            return f"bad arguments for {tool.name}: {exc}"
        return None
    required = tool.parameters.get("required") or []
    missing = [r for r in required if r not in arguments]
    return f"bad arguments for {tool.name}: missing {', '.join(missing)}" if missing else None


def _error(text: str) -> str:
    return ERROR_PREFIX + text
