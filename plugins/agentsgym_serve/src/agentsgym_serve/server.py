"""Running the env server: in the foreground (``agentsgym serve``) or in a thread.

The listening socket is bound before uvicorn starts, so ``port=0`` (any free port)
works and the real address is known at once. It is announced only once the server
accepts connections (uvicorn listens on it and the app's startup is done): the CLI
prints it then (:func:`run_server`'s ``on_started``), and :class:`BackgroundServer`
(tests, benchmarks, notebooks) returns from ``start`` then, exposing it as ``.url``::

    from agentsgym_serve import BackgroundServer, create_app

    with BackgroundServer(create_app("agentsgym/GuessTheNumber-v0")) as server:
        env = agentsgym.make(server.url, tokenizer="agentsgym/tiny-chatml")
"""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import Self

logger = logging.getLogger("agentsgym_serve")

KEEP_ALIVE_SECONDS = 30
"""How long the server keeps an idle connection: longer than the client's own
keep-alive (10 s), so the client, not the server, closes idle connections and a
request never races the server's close."""
START_TIMEOUT_SECONDS = 60.0
BACKLOG = 2048
"""Connections the kernel queues before the server accepts them (uvicorn's default);
a server that a thousand clients connect to at once takes a larger one."""


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``port=0``: one the OS picks)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def uvicorn_server(
    app: Any,
    *,
    log_level: str = "warning",
    keep_alive_seconds: float = KEEP_ALIVE_SECONDS,
    backlog: int = BACKLOG,
    ws_compression: bool = False,
) -> Any:
    """A uvicorn server for ``app`` that leaves logging to us (no access log: a URL can
    carry a secret, such as the model gateway's path-prefix session keys).

    ``ws_compression``: accept a WebSocket client's offer of permessage-deflate. Off by
    default, as Node's ``ws`` server has it: a client that offers it (openenv-core's
    does) then talks uncompressed, which the protocol allows. An env server's messages
    are small and its clients near; inflating every request and deflating every reply
    cost about 20 µs of the server's CPU in an OpenEnv step of 80 (and more in the
    client; bench/README.md), besides a compressor's memory per connection. Turn it on
    for far clients that get large observations."""
    import uvicorn

    config = uvicorn.Config(
        app,
        log_config=None,
        log_level=log_level,
        access_log=False,
        lifespan="on",
        timeout_keep_alive=int(keep_alive_seconds),
        timeout_graceful_shutdown=10,
        backlog=backlog,
        ws_per_message_deflate=ws_compression,
    )
    return uvicorn.Server(config)


def freeze_heap() -> int:
    """Collect the garbage, then take every object alive now out of the cyclic garbage
    collector's walks; the number of objects frozen. For a process that only serves
    from here on (``agentsgym serve`` calls it once the app is built).

    Python's full collection walks every tracked object of the process. A server that
    has imported FastAPI, pydantic, openenv-core and an env holds about 240,000, and
    the objects its episodes leave behind trigger a full collection every few thousand
    steps: a pause of 100-150 ms on the event loop, in which every session waits (the
    p99 of a step at 64 sessions was 150 ms, and a sixth of the run's time went to one
    such pause; bench/README.md). What exists once the app is built (modules, classes,
    the env) lives as long as the process, so it is frozen, as ``gc.freeze`` is meant
    to be used: full collections then walk only what the server made since. Not done
    for :class:`BackgroundServer`, which shares its process with other work."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    logger.info("heap frozen", extra={"fields": {"event": "heap_frozen", "objects": frozen}})
    return frozen


def run_server(
    server: Any, sockets: list[socket.socket], *, on_started: Callable[[], None] | None = None
) -> None:
    """Run a uvicorn server until it exits, on a new event loop of this thread (uvloop's
    when it is installed, as uvicorn's ``loop="auto"`` picks); ``on_started()`` is
    called once it accepts connections (never, if it fails to start).

    ``uvicorn.Server.run`` is not used: uvicorn 0.30 (the declared floor) sets uvloop's
    event-loop policy for the whole process there, and a plain asyncio loop made
    elsewhere, such as agentsgym's own, then cannot start a subprocess (the policy's
    child watcher raises NotImplementedError; a harness env's programs are
    subprocesses). Later uvicorn passes a loop factory instead, as this does."""
    loop = _new_loop()
    try:
        loop.run_until_complete(_serve_announcing(server, sockets, on_started))
    finally:
        try:
            _cancel_remaining(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


async def _serve_announcing(
    server: Any, sockets: list[socket.socket], on_started: Callable[[], None] | None
) -> None:
    """``server.serve``, calling ``on_started`` once uvicorn says it has started (it
    listens on the sockets and the app's startup is done)."""
    serving = asyncio.ensure_future(server.serve(sockets=sockets))
    if on_started is not None:
        while not server.started and not serving.done():
            await asyncio.wait({serving}, timeout=0.01)
        if server.started:
            on_started()
    await serving


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _cancel_remaining(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the tasks the server left and wait for them, as ``asyncio.run`` does."""
    remaining = asyncio.all_tasks(loop)
    for task in remaining:
        task.cancel()
    if remaining:
        loop.run_until_complete(asyncio.gather(*remaining, return_exceptions=True))


class BackgroundServer:
    """Serves an ASGI app on loopback from a daemon thread (see the module docstring).

    The one background server of agentsgym's plugins: agentsgym-serve's env server and
    loopback model server run on it, and so does agentsgym-gateway. ``start`` raises
    :class:`OSError` naming the address when the socket cannot be bound (the socket is
    closed), and :class:`RuntimeError` when uvicorn does not start (the server is
    stopped and the socket closed).
    """

    def __init__(
        self,
        app: Any,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        keep_alive_seconds: float = KEEP_ALIVE_SECONDS,
        backlog: int = BACKLOG,
        name: str = "agentsgym-serve",
        ws_compression: bool = False,
    ) -> None:
        self.app = app
        self.host = host
        self.port = port
        self.url = ""
        self.keep_alive_seconds = keep_alive_seconds
        self.backlog = backlog
        self.name = name
        self.ws_compression = ws_compression
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    def start(self) -> Self:
        try:
            sock = bind_socket(self.host, self.port)
        except OSError as exc:
            raise OSError(
                exc.errno,
                f"{self.name} cannot listen on {self.host}:{self.port}: "
                f"{exc.strerror or exc}; choose another port (0 picks a free one)",
            ) from exc
        self._socket = sock
        self.port = sock.getsockname()[1]
        self.url = url_of(sock)
        self._server = uvicorn_server(
            self.app,
            keep_alive_seconds=self.keep_alive_seconds,
            backlog=self.backlog,
            ws_compression=self.ws_compression,
        )
        self._thread = threading.Thread(
            target=self._serve, args=(self._server, sock), name=self.name, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} did not start on {self.url}")
            time.sleep(0.01)
        return self

    @staticmethod
    def _serve(server: Any, sock: socket.socket) -> None:
        try:
            run_server(server, [sock])
        except SystemExit:
            pass  # uvicorn exits when the app's startup fails; it has logged why

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._server = self._thread = None
        if self._socket is not None:
            # uvicorn closes a socket it served; one it never got to serve is closed here
            self._socket.close()
            self._socket = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
