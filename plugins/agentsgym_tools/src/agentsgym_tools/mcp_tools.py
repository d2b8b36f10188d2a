"""MCPTools: the tools of an MCP server, through the ``mcp`` SDK over stdio.

The server is started as a subprocess (``command`` and ``args``). Its tool list is read
once, with the schemas it declares (``input_schema``); calls go through one client
session per event loop, kept open until :meth:`MCPTools.close`. A call the server
answers with ``is_error`` raises :class:`MCPToolError`, which the runner turns into an
``Error:`` tool message like any tool's exception.

``pip install 'agentsgym-tools[mcp]'`` (the ``mcp`` SDK, 2.x).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from agentsgym.redaction import redact_argv, redact_text
from agentsgym_tools.errors import ToolDeclarationError
from agentsgym_tools.tool import Tool

__all__ = ["MCPToolError", "MCPTools"]

logger = logging.getLogger(__name__)


class MCPToolError(RuntimeError):
    """The MCP server answered a call with an error (its text is the message)."""


class _Connection:
    """One client session, held open by a task on its loop until stopped."""

    def __init__(self, params: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.params = params
        self.loop = loop
        self.ready = asyncio.Event()
        self.stop = asyncio.Event()
        self.session: Any = None
        self.failure: BaseException | None = None
        self.task = loop.create_task(self._hold())

    async def _hold(self) -> None:
        from mcp import ClientSession
        from mcp.client.stdio import stdio_client

        try:
            async with (
                stdio_client(self.params) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                self.session = session
                self.ready.set()
                await self.stop.wait()
        except BaseException as exc:
            self.failure = exc
            self.ready.set()
            if not isinstance(exc, (Exception, asyncio.CancelledError)):
                raise

    def close(self) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.stop.set)


def _close_all(connections: dict[Any, _Connection]) -> None:
    for connection in list(connections.values()):
        connection.close()
    connections.clear()


class MCPTools:
    """The tools of the MCP server started by ``command`` (see the module docstring).

    :param command: the server's executable, e.g. ``sys.executable`` or ``"npx"``.
    :param args: its arguments.
    :param env: its environment (``None``: the SDK's safe default).
    :param cwd: its working directory.
    :param start_timeout_seconds: how long starting it and listing its tools may take.
    """

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        start_timeout_seconds: float = 60.0,
    ) -> None:
        try:
            from mcp import StdioServerParameters
        except ImportError as exc:
            raise ToolDeclarationError(
                "tools from an MCP server need the mcp SDK: pip install 'agentsgym-tools[mcp]'"
            ) from exc
        self.params = StdioServerParameters(
            command=command, args=list(args), env=dict(env) if env else None, cwd=cwd
        )
        self.start_timeout_seconds = start_timeout_seconds
        self._tools: list[Tool] | None = None
        self._lock = threading.Lock()
        self._connections: dict[Any, _Connection] = {}
        weakref.finalize(self, _close_all, self._connections)

    def tools(self) -> list[Tool]:
        """The server's tools (listed once, in a worker thread: callable from a loop)."""
        with self._lock:
            if self._tools is None:
                with concurrent.futures.ThreadPoolExecutor(1) as pool:
                    listed = pool.submit(asyncio.run, self._list()).result()
                self._tools = [self._as_tool(t) for t in listed]
            return list(self._tools)

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        """Call tool ``name``; its text content (JSON for structured content only)."""
        session = await self._session()
        result = await session.call_tool(name, arguments)
        texts = [c.text for c in result.content or [] if getattr(c, "text", None) is not None]
        text = "\n".join(texts)
        if not texts and getattr(result, "structured_content", None) is not None:
            text = json.dumps(result.structured_content, ensure_ascii=False)
        if getattr(result, "is_error", False):
            raise MCPToolError(text or f"{name} failed")
        return text

    def close(self) -> None:
        """Stop the server processes of every loop's session."""
        _close_all(self._connections)

    async def _list(self) -> list[Any]:
        from mcp import ClientSession
        from mcp.client.stdio import stdio_client

        async def listing() -> list[Any]:
            async with (
                stdio_client(self.params) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return list((await session.list_tools()).tools)

        try:
            return await asyncio.wait_for(listing(), self.start_timeout_seconds)
        except Exception as exc:
            raise ToolDeclarationError(
                f"could not list the tools of the MCP server "
                f"{' '.join(redact_argv([self.params.command, *self.params.args]))}: "
                f"{type(exc).__name__}: {redact_text(str(exc))}"
            ) from exc

    async def _session(self) -> Any:
        loop = asyncio.get_running_loop()
        connection = self._connections.get(loop)
        if connection is None or connection.failure is not None:
            connection = self._connections[loop] = _Connection(self.params, loop)
        await asyncio.wait_for(connection.ready.wait(), self.start_timeout_seconds)
        if connection.failure is not None:
            raise MCPToolError(f"the MCP server could not be reached: {connection.failure}")
        return connection.session

    def _as_tool(self, listed: Any) -> Tool:
        parameters = dict(listed.input_schema or {"type": "object", "properties": {}})
        parameters.pop("title", None)
        function = {
            "name": listed.name,
            "description": listed.description or "",
            "parameters": parameters,
        }
        return Tool(
            listed.name, {"type": "function", "function": function}, _MCPCall(self, listed.name)
        )


class _MCPCall:
    """A tool's function: the call's keyword arguments go to the server as they are."""

    def __init__(self, tools: MCPTools, name: str) -> None:
        self.tools = tools
        self.name = name

    async def __call__(self, **arguments: Any) -> str:
        return await self.tools.call(self.name, arguments)
