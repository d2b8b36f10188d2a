"""ToolRunner: the calls of one reply, run concurrently, each under a timeout, each
answered by a ``tool`` message; what goes wrong is said in that message, never raised,
except a tool that could not run at all (:class:`ToolUnavailableError`)."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import logging
from collections.abc import Sequence
from typing import Any

from agentsgym import TOOL_ERROR_PREFIX, Messages
from agentsgym.runtime import redact_text
from agentsgym_tools.context import ToolContext
from agentsgym_tools.errors import ToolError, ToolUnavailableError
from agentsgym_tools.threads import ToolEscape, ToolThreads, shared_tool_threads
from agentsgym_tools.tool import Tool

__all__ = ["ToolRunner", "tool_message"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_RESULT_CHARS = 32_000


def tool_message(call_id: str, name: str, content: str) -> dict[str, Any]:
    """A ``tool`` message answering call ``call_id`` of tool ``name``."""
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


class ToolRunner:
    """Runs tool calls against ``tools``.

    :param timeout_seconds: each call's budget. An async tool that overruns is
        cancelled; a sync one is abandoned (see :class:`~agentsgym_tools.ToolThreads`).
    :param max_calls: calls answered per reply; the rest are answered with an error.
    :param max_result_chars: the longest answer; a longer one is cut, and says so.
    :param threads: where sync tools run (default: the process's shared tool threads).
    """

    def __init__(
        self,
        tools: Sequence[Tool],
        *,
        timeout_seconds: float = 30.0,
        max_calls: int = 8,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
        threads: ToolThreads | None = None,
    ) -> None:
        self.tools = {t.name: t for t in tools}
        self.timeout_seconds = timeout_seconds
        self.max_calls = max_calls
        self.max_result_chars = max_result_chars
        self.threads = threads

    async def run(
        self, calls: Sequence[dict[str, Any]], context: ToolContext | None = None
    ) -> Messages:
        """One ``tool`` message per call, in the order of the calls. ``context`` goes to
        the tools that ask for it (a fresh one, of empty task data, if not given).
        Raises :class:`ToolUnavailableError` when a tool could not be run at all."""
        context = context if context is not None else ToolContext(task_data={})
        answers = await asyncio.gather(
            *(self._answer(index, call, context) for index, call in enumerate(calls))
        )
        return [
            tool_message(call_id, name, _capped(text, self.max_result_chars))
            for call_id, name, text in answers
        ]

    async def _answer(
        self, index: int, call: dict[str, Any], context: ToolContext
    ) -> tuple[str, str, str]:
        function = call.get("function") or {}
        name = str(function.get("name", ""))
        call_id = str(call.get("id") or f"call_{index}")
        if index >= self.max_calls:
            return (
                call_id,
                name,
                _error(f"not run: at most {self.max_calls} tool calls are answered per turn"),
            )
        return call_id, name, await self._run_one(name, function.get("arguments", {}), context)

    async def _run_one(self, name: str, arguments: Any, context: ToolContext) -> str:
        tool = self.tools.get(name)
        if tool is None or tool.function is None:
            known = ", ".join(sorted(self.tools)) or "none"
            return _error(f"there is no tool named {name!r}; the tools are: {known}")
        if not isinstance(arguments, dict):
            return _error(f"the arguments of {name} must be a JSON object, not {arguments!r:.80}")
        problem = _binding_problem(tool, arguments)
        if problem:
            return _error(problem)
        if tool.context_parameter is not None:
            arguments = {**arguments, tool.context_parameter: context}
        try:
            result = await self._call(tool, arguments)
        except asyncio.TimeoutError:
            return _error(f"{name} did not finish within {self.timeout_seconds:g} seconds")
        except ToolUnavailableError:
            raise  # the episode fails: a broken tool is never an answer
        except ToolError as exc:
            return _error(redact_text(f"{name}: {exc}"))
        except ToolEscape as exc:
            kind = type(exc.original).__name__
            return _error(redact_text(f"{name} raised {kind}: {exc}".rstrip(": ")))
        except Exception as exc:
            logger.debug("tool %s raised", name, exc_info=True)
            return _error(redact_text(f"{name} raised {type(exc).__name__}: {exc}"))
        return as_text(result)

    async def _call(self, tool: Tool, arguments: dict[str, Any]) -> Any:
        assert tool.function is not None
        function = tool.function
        if inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
            getattr(function, "__call__", None)  # noqa: B004
        ):
            return await asyncio.wait_for(_contained(function(**arguments)), self.timeout_seconds)
        threads = self.threads or shared_tool_threads()
        result = await threads.run(functools.partial(function, **arguments), self.timeout_seconds)
        if inspect.isawaitable(result):
            return await asyncio.wait_for(_contained(result), self.timeout_seconds)
        return result


async def _contained(awaitable: Any) -> Any:
    """An async tool's result; ``SystemExit`` and the like become :class:`ToolEscape`
    here, inside the task, where asyncio would otherwise stop the event loop with them."""
    try:
        return await awaitable
    except (Exception, asyncio.CancelledError):
        raise
    except BaseException as exc:  # a tool must never end the run
        raise ToolEscape(exc) from exc


def _capped(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return (
        f"{text[:limit]}\n[cut: the result was {len(text)} characters long; only the first "
        f"{limit} are shown]"
    )


def as_text(result: Any) -> str:
    """What a tool returned, as the text of its message: text as is, else JSON."""
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(result)


def _binding_problem(tool: Tool, arguments: dict[str, Any]) -> str | None:
    """Why these arguments do not fit the tool (a function's signature, else its schema).
    A hidden parameter is not the model's to give: naming it is an unexpected argument."""
    assert tool.function is not None
    hidden = sorted(set(arguments) & set(tool.hidden))
    if hidden:
        return f"bad arguments for {tool.name}: got an unexpected keyword argument {hidden[0]!r}"
    try:
        signature = inspect.signature(tool.function)
    except (TypeError, ValueError):
        signature = None
    if signature is not None:
        try:
            injected = {tool.context_parameter: None} if tool.context_parameter else {}
            signature.bind(**arguments, **injected)
        except TypeError as exc:
            return f"bad arguments for {tool.name}: {exc}"
        return None
    required = tool.parameters.get("required") or []
    missing = [r for r in required if r not in arguments]
    return f"bad arguments for {tool.name}: missing {', '.join(missing)}" if missing else None


def _error(text: str) -> str:
    return TOOL_ERROR_PREFIX + text
