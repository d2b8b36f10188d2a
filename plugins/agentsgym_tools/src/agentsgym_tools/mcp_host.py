"""MCPHost: one MCP server process and its client session, kept for as long as the host.

The session lives on an event loop of its own, in a daemon thread, so that every caller
shares it, whatever its loop (agentsgym's background loop, ``asyncio.run`` in a test,
TRL's threads): the server starts once, not once per loop. Calls are submitted to that
loop from anywhere and awaited (or waited for) by the caller.

A server that exits is noticed by the call it broke: that call raises
:class:`~agentsgym_tools.ToolUnavailableError` (the episode fails: a broken tool never
answers the model as if it had run), and the next call starts the server again. The
server's stderr goes to a temporary file (never the run's terminal): errors quote its
last lines.

A server runs in a process group of its own, so nothing but its stop ends it. Every
connection is stopped, whatever it is doing: one still starting (a server that hangs
before it answers ``initialize``) when its start times out, and all of them at
:meth:`MCPHost.close`, which waits until their processes are gone. The SDK stops a
process by closing its stdin, then terminating and killing its group.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import tempfile
import threading
from collections.abc import Awaitable, Callable
from typing import IO, Any, TypeVar

from agentsgym.runtime import redact_text
from agentsgym_tools.errors import ToolUnavailableError

__all__ = ["MCPHost", "ServerLost"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
STDERR_TAIL_CHARS = 1500
CLOSE_TIMEOUT_SECONDS = 10.0


class ServerLost(ToolUnavailableError):
    """The server exited, or its connection closed, while a call needed it."""


class _Connection:
    """One server process and its session, held open by a task on the host's loop.

    :meth:`stop` ends it at any point: a server still starting (one that hangs before
    it answers ``initialize``) has its start cancelled, so the task leaves the SDK's
    client context, which stops the process (its whole process group) either way."""

    def __init__(self, params: Any, errlog: IO[str]) -> None:
        import anyio

        self.params = params
        self.errlog = errlog
        self.ready = asyncio.Event()
        self.stopped = asyncio.Event()
        self.session: Any = None
        self.failure: BaseException | None = None
        self.start = anyio.CancelScope()  # cancelled before it is entered: that takes effect
        self.task = asyncio.get_running_loop().create_task(self._hold())

    def stop(self) -> None:
        """End the connection (on the host's loop): the process stops."""
        self.stopped.set()
        self.start.cancel()

    async def _hold(self) -> None:
        from mcp import ClientSession
        from mcp.client.stdio import stdio_client

        try:
            async with (
                stdio_client(self.params, errlog=self.errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                with self.start:
                    await session.initialize()
                    self.session = session
                if self.session is not None:
                    self.ready.set()
                    await self.stopped.wait()
        except Exception as exc:  # noqa: BLE001 - kept, and raised to the caller who waits
            self.failure = exc
        finally:
            self.session = None
            self.ready.set()


class MCPHost:
    """One MCP server (see the module docstring).

    :param params: the mcp SDK's ``StdioServerParameters``.
    :param describe: how errors name the server (secrets redacted).
    :param start_timeout_seconds: how long a start (and its ``initialize``) may take.
    :param server_log: where the server's stderr goes; ``None``: a temporary file.
    """

    def __init__(
        self,
        params: Any,
        *,
        describe: str,
        start_timeout_seconds: float = 60.0,
        server_log: IO[str] | None = None,
    ) -> None:
        self.params = params
        self.describe = describe
        self.start_timeout_seconds = start_timeout_seconds
        self.starts = 0  # how many times the server was started
        self._own_log = server_log is None
        if server_log is None:
            handle, self.log_path = tempfile.mkstemp(prefix="agentsgym-mcp-", suffix=".log")
            server_log = os.fdopen(handle, "a", encoding="utf-8")
        else:
            self.log_path = getattr(server_log, "name", None)
        self.server_log = server_log
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._connection: _Connection | None = None
        self._connections: set[_Connection] = set()  # every one whose process may run
        self._starting: asyncio.Lock | None = None
        self._closed = False

    # ----------------------------------------------------------------- calls
    async def call(self, work: Callable[[Any], Awaitable[T]]) -> T:
        """``await work(session)`` on the host's loop, awaited from any loop."""
        return await asyncio.wrap_future(self.submit(work))

    def call_sync(self, work: Callable[[Any], Awaitable[T]], timeout: float) -> T:
        """``work(session)`` from a plain call (never from the host's own thread)."""
        future = self.submit(work)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def submit(self, work: Callable[[Any], Awaitable[T]]) -> concurrent.futures.Future[T]:
        loop = self._running_loop()
        return asyncio.run_coroutine_threadsafe(self._with_session(work), loop)

    def stderr_tail(self) -> str:
        """The last lines the server wrote to stderr (redacted), or ``""``."""
        if not self._own_log or not self.log_path:
            return ""
        with contextlib.suppress(OSError):
            self.server_log.flush()
            with open(self.log_path, encoding="utf-8", errors="replace") as log:
                log.seek(max(0, os.path.getsize(self.log_path) - STDERR_TAIL_CHARS))
                return redact_text(log.read().strip())
        return ""

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop the server and the host's thread (idempotent, callable from any thread)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            if threading.current_thread() is not thread:
                stopping = asyncio.run_coroutine_threadsafe(self._stop_connections(), loop)
                with contextlib.suppress(Exception):  # it bounds its own wait
                    stopping.result(2 * CLOSE_TIMEOUT_SECONDS)
            loop.call_soon_threadsafe(loop.stop)
            if threading.current_thread() is not thread:
                thread.join(CLOSE_TIMEOUT_SECONDS)
        if self._own_log:
            with contextlib.suppress(OSError):
                self.server_log.close()
                os.unlink(self.log_path)

    # ------------------------------------------------------------- internals
    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._closed:
                raise ToolUnavailableError(
                    f"the MCP server {self.describe} was closed; make a new MCPTools to use it"
                )
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=_serve, args=(loop,), name="agentsgym-mcp", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    async def _with_session(self, work: Callable[[Any], Awaitable[T]]) -> T:
        connection = await self._connected()
        try:
            return await work(connection.session)
        except Exception as exc:
            if not _is_connection_loss(exc) and connection.session is not None:
                raise
            self._drop(connection)
            tail = self.stderr_tail()
            raise ServerLost(
                f"the MCP server {self.describe} exited or closed its connection during the "
                f"call ({type(exc).__name__}: {redact_text(str(exc))}); the episode that "
                "needed it fails, and the next call starts the server again"
                + (f". Its stderr ended:\n{tail}" if tail else "")
            ) from exc

    async def _connected(self) -> _Connection:
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            connection = self._connection
            if connection is not None and connection.session is not None:
                return connection
            if connection is not None:
                self._drop(connection)
            self.starts += 1
            connection = self._connection = _Connection(self.params, self.server_log)
            self._connections.add(connection)
            connection.task.add_done_callback(
                lambda _task, c=connection: self._connections.discard(c)
            )
            try:
                await asyncio.wait_for(connection.ready.wait(), self.start_timeout_seconds)
            except asyncio.TimeoutError:
                self._drop(connection)
                raise ToolUnavailableError(
                    f"the MCP server {self.describe} did not start within "
                    f"start_timeout_seconds={self.start_timeout_seconds:g}" + self._stderr_note()
                ) from None
            if connection.session is None:
                self._drop(connection)
                failure = connection.failure
                reason = f"{type(failure).__name__}: {failure}" if failure else "it exited"
                raise ToolUnavailableError(
                    f"the MCP server {self.describe} could not be started "
                    f"({redact_text(reason)})" + self._stderr_note()
                )
            return connection

    def _stderr_note(self) -> str:
        tail = self.stderr_tail()
        return f". Its stderr ended:\n{tail}" if tail else ""

    def _drop(self, connection: _Connection) -> None:
        if self._connection is connection:
            self._connection = None
        connection.stop()  # its task leaves the client's context: the process ends

    async def _stop_connections(self) -> None:
        """Stop every connection, those dropped earlier and still stopping included, and
        wait until their processes are gone (the loop stops after this)."""
        self._connection = None
        connections, self._connections = list(self._connections), set()
        for connection in connections:
            connection.stop()
        tasks = [connection.task for connection in connections]
        if tasks:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT_SECONDS)


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.close()


def _is_connection_loss(exc: BaseException) -> bool:
    """Whether ``exc`` says the server is gone (not that a call was refused)."""
    import anyio
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    if isinstance(exc, MCPError):
        return bool(exc.code == CONNECTION_CLOSED)
    lost = (
        anyio.ClosedResourceError,
        anyio.BrokenResourceError,
        anyio.EndOfStream,
        ConnectionError,
        EOFError,
    )
    return isinstance(exc, lost)
