"""MCPTools: the tools of an MCP server, through the ``mcp`` SDK over stdio.

The server is started as a subprocess (``command`` and ``args``) once, the first time it
is needed, and kept for as long as the ``MCPTools`` (until :meth:`MCPTools.close`): one
client session, on a thread of its own, serves every episode and every event loop
(:class:`~agentsgym_tools.mcp_host.MCPHost`). The ``MCPTools`` of the same server share
it, and it lingers a few seconds after the last is closed, for an env built again to
reuse (:mod:`~agentsgym_tools.mcp_pool`). Its tool list is read once per ``MCPTools``,
with the schemas it declares (``input_schema``).

* A call the server answers with ``is_error`` raises :class:`MCPToolError` (a
  :class:`~agentsgym_tools.ToolError`): the model reads the server's reason.
* A server that exits during a call fails that episode
  (:class:`~agentsgym_tools.ToolUnavailableError`); the next call starts it again.
* ``inject`` gives the server arguments the model never sees: each is computed from the
  call's :class:`~agentsgym_tools.ToolContext`, left out of the schemas, refused when
  the model names it, and cut out of the server's error text.

``pip install -e './plugins/agentsgym_tools[mcp]'`` in a clone (the ``mcp`` SDK, 2.x).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

from agentsgym.runtime import redact_argv, redact_text
from agentsgym_tools import mcp_pool
from agentsgym_tools.context import ToolContext
from agentsgym_tools.errors import ToolDeclarationError, ToolError, ToolUnavailableError
from agentsgym_tools.mcp_host import MCPHost
from agentsgym_tools.tool import Tool

__all__ = ["MCPToolError", "MCPTools"]

logger = logging.getLogger(__name__)

CONTEXT_PARAMETER = "agentsgym_context"
Injector = Callable[[ToolContext], Any]


class MCPToolError(ToolError):
    """The MCP server answered a call with an error (its text is the message)."""


class MCPTools:
    """The tools of the MCP server started by ``command`` (see the module docstring).

    :param command: the server's executable, e.g. ``sys.executable`` or ``"npx"``.
    :param args: its arguments.
    :param env: its environment (``None``: the SDK's safe default).
    :param cwd: its working directory.
    :param start_timeout_seconds: how long starting it and listing its tools may take.
    :param inject: hidden arguments, ``{name: function of the ToolContext}``, e.g.
        ``{"seed": lambda context: context.task_data["seed"]}``.
    :param server_log: where the server's stderr goes (``None``: a temporary file whose
        last lines errors quote; ``sys.stderr`` to watch it, the server then not shared).
    :param linger_seconds: how long the server outlives its last ``MCPTools``, for the
        next one of the same server to reuse (``0``: it stops at once).
    """

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        start_timeout_seconds: float = 60.0,
        inject: Mapping[str, Injector] | None = None,
        server_log: IO[str] | None = None,
        linger_seconds: float = 10.0,
    ) -> None:
        try:
            from mcp import StdioServerParameters
        except ImportError as exc:
            raise ToolDeclarationError(
                "tools from an MCP server need the mcp SDK: pip install 'mcp>=2.3,<3' (in a clone: "
                "pip install -e './plugins/agentsgym_tools[mcp]')"
            ) from exc
        self.params = StdioServerParameters(
            command=command, args=list(args), env=dict(env) if env else None, cwd=cwd
        )
        self.start_timeout_seconds = start_timeout_seconds
        self.inject = dict(inject or {})
        self.described = " ".join(redact_argv([command, *args]))

        def make_host() -> MCPHost:
            return MCPHost(
                self.params,
                describe=self.described,
                start_timeout_seconds=start_timeout_seconds,
                server_log=server_log,
            )

        if server_log is None:  # shared by the MCPTools of the same server
            key = (command, tuple(args), tuple(sorted((env or {}).items())), cwd)
            self.host = mcp_pool.acquire(key, make_host)
            self._release = weakref.finalize(self, mcp_pool.release, key, self.host, linger_seconds)
        else:
            self.host = make_host()
            self._release = weakref.finalize(self, self.host.close)
        self._tools: list[Tool] | None = None
        self._injects: dict[str, tuple[str, ...]] = {}  # per tool: the injected it takes
        self._lock = threading.Lock()
        self._warned_crashes: set[str] = set()

    def tools(self) -> list[Tool]:
        """The server's tools (listed once; a plain call, fine from inside a loop)."""
        with self._lock:
            if self._tools is None:
                try:
                    listed = self.host.call_sync(_list_tools, self.start_timeout_seconds + 5)
                except Exception as exc:
                    raise ToolDeclarationError(
                        f"could not list the tools of the MCP server {self.described}: "
                        f"{type(exc).__name__}: {redact_text(str(exc))}"
                    ) from exc
                self._tools = [self._as_tool(t) for t in listed]
            return list(self._tools)

    async def call(
        self, name: str, arguments: dict[str, Any], context: ToolContext | None = None
    ) -> str:
        """Call tool ``name`` with ``arguments`` and the injected ones; its text content
        (JSON for structured content only)."""
        if not self._release.alive:
            raise ToolUnavailableError(
                f"the MCPTools of {self.described} was closed; make a new one to use it"
            )
        context = context if context is not None else ToolContext(task_data={})
        keys = self._injects.get(name, tuple(self.inject))
        injected = {key: self.inject[key](context) for key in keys}

        async def call_tool(session: Any) -> Any:
            return await session.call_tool(name, {**arguments, **injected})

        try:
            result = await self.host.call(call_tool)
        except ToolUnavailableError:
            raise
        except Exception as exc:  # a protocol error may quote the arguments back too
            reason = without_injected(f"{type(exc).__name__}: {exc}", injected)
            raise MCPToolError(reason) from exc
        texts = [c.text for c in result.content or [] if getattr(c, "text", None) is not None]
        text = "\n".join(texts)
        if not texts and getattr(result, "structured_content", None) is not None:
            text = json.dumps(result.structured_content, ensure_ascii=False)
        if getattr(result, "is_error", False):
            raise MCPToolError(self._reason(name, without_injected(text, injected)))
        return text

    def close(self) -> None:
        """Done with the server: it stops when no other ``MCPTools`` of it is open, after
        ``linger_seconds``. A later call raises
        :class:`~agentsgym_tools.ToolUnavailableError`."""
        self._release()

    def _reason(self, name: str, text: str) -> str:
        """The server's error, less the SDK's ``Error executing tool <name>`` prefix; a
        crash (an exception other than ``ToolError`` on the server) gives no reason."""
        prefix = f"Error executing tool {name}"
        reason = text.removeprefix(prefix).removeprefix(":").strip() if text else ""
        if reason:
            return reason
        if name not in self._warned_crashes:
            self._warned_crashes.add(name)
            logger.warning(
                "MCP tool %s of %s crashed on the server: the model read no reason. Raise "
                "mcp.server.mcpserver.exceptions.ToolError(reason) for a failure the model "
                "should read (the server's stderr, with the traceback: %s)",
                name,
                self.described,
                self.host.log_path or "not kept",
            )
        return "it failed on the MCP server, which gave no reason"

    def _as_tool(self, listed: Any) -> Tool:
        parameters = dict(listed.input_schema or {"type": "object", "properties": {}})
        parameters.pop("title", None)
        properties = dict(parameters.get("properties") or {})
        injects = self._injects[listed.name] = tuple(k for k in self.inject if k in properties)
        parameters["properties"] = {k: v for k, v in properties.items() if k not in self.inject}
        if "required" in parameters:
            parameters["required"] = [r for r in parameters["required"] if r not in self.inject]
        function = {
            "name": listed.name,
            "description": listed.description or "",
            "parameters": parameters,
        }
        return Tool(
            listed.name,
            {"type": "function", "function": function},
            _MCPCall(self, listed.name),
            context_parameter=CONTEXT_PARAMETER,
            hidden=(CONTEXT_PARAMETER, *injects),
        )


async def _list_tools(session: Any) -> list[Any]:
    return list((await session.list_tools()).tools)


class _MCPCall:
    """A tool's function: the call's keyword arguments go to the server as they are."""

    def __init__(self, tools: MCPTools, name: str) -> None:
        self.tools = tools
        self.name = name

    async def __call__(self, agentsgym_context: ToolContext | None = None, **arguments: Any) -> str:
        return await self.tools.call(self.name, arguments, agentsgym_context)


def without_injected(text: str, injected: Mapping[str, Any]) -> str:
    """``text`` with every ``key: value`` / ``key=value`` of the injected arguments cut
    out (a validation error quotes the whole input back)."""
    for key, value in injected.items():
        written = (repr(value), json.dumps(value, default=str), str(value))
        forms = {re.escape(form) for form in written if form}
        value_pattern = "|".join(sorted(forms, key=len, reverse=True))
        quoted_key = rf"""['"]{re.escape(key)}['"]\s*:\s*(?:{value_pattern})"""
        text = re.sub(rf",\s*{quoted_key}", "", text)
        text = re.sub(rf"{quoted_key}\s*,?\s*", "", text)
        text = re.sub(rf"\b{re.escape(key)}=(?:{value_pattern})", "", text)
    return text
