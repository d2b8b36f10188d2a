"""BackgroundServer: the one loopback uvicorn server in a thread (serve and gateway).

A port that cannot be bound is a clear error naming the address, with the socket
closed; a server that does not start is stopped with its socket closed; a stopped
server's port can be listened on again.
"""

from __future__ import annotations

import contextlib
import socket
import types
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentsgym_serve import BackgroundServer
from agentsgym_serve import server as server_module


async def hello(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A plain ASGI app: ``hello`` to every request, lifespan events acknowledged."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello"})


async def broken_startup(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An app whose lifespan startup fails: uvicorn exits before serving."""
    await receive()
    await send({"type": "lifespan.startup.failed", "message": "no database"})


@pytest.fixture
def sockets_made(monkeypatch: pytest.MonkeyPatch) -> list[socket.socket]:
    """Every socket the server module creates (and no other), to check that each one
    got closed."""
    made: list[socket.socket] = []

    class Recorded(socket.socket):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    recording = types.ModuleType("socket")
    recording.__dict__.update(vars(socket))
    recording.socket = Recorded  # type: ignore[attr-defined]
    monkeypatch.setattr(server_module, "socket", recording)
    return made


@contextlib.contextmanager
def taken_port() -> Iterator[int]:
    """A port on 127.0.0.1 that another socket listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def test_a_taken_port_is_an_error_naming_it_and_the_socket_is_closed(
    sockets_made: list[socket.socket],
) -> None:
    with taken_port() as port:
        server = BackgroundServer(hello, port=port, name="test-server")
        with pytest.raises(OSError, match=f"test-server cannot listen on 127.0.0.1:{port}"):
            server.start()
    assert len(sockets_made) == 1
    assert sockets_made[0].fileno() == -1  # closed


def test_a_server_that_does_not_start_is_stopped_with_its_socket_closed(
    sockets_made: list[socket.socket],
) -> None:
    server = BackgroundServer(broken_startup, name="test-server")
    with pytest.raises(RuntimeError, match="test-server did not start on http://127.0.0.1:"):
        server.start()
    assert [s.fileno() for s in sockets_made] == [-1]


def test_a_stopped_server_frees_its_port(sockets_made: list[socket.socket]) -> None:
    with BackgroundServer(hello) as server:
        assert httpx.get(server.url).text == "hello"
        port = server.port
    assert [s.fileno() for s in sockets_made] == [-1]
    with BackgroundServer(hello, port=port) as again:
        assert httpx.get(again.url).text == "hello"


def test_a_server_leaves_the_process_event_loop_policy_as_it_was() -> None:
    """uvicorn 0.30's Server.run set uvloop's policy for the whole process, after which a
    plain asyncio loop could not start a subprocess (a harness env's program)."""
    import asyncio
    import sys

    policy = asyncio.get_event_loop_policy()
    with BackgroundServer(hello) as server:
        assert httpx.get(server.url).text == "hello"
    assert asyncio.get_event_loop_policy() is policy

    async def run_a_subprocess() -> int:
        process = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
        return await process.wait()

    assert asyncio.run(run_a_subprocess()) == 0


def test_run_server_announces_the_server_once_it_accepts_connections() -> None:
    """``agentsgym serve`` prints its address from ``on_started``: never while the app
    is still starting, and a client that connects as soon as it is announced is
    answered, with no retry."""
    import asyncio
    import threading

    release = threading.Event()

    async def slow_startup(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await receive()
            while not release.is_set():  # the test says when startup is done
                await asyncio.sleep(0.01)
            await send({"type": "lifespan.startup.complete"})
            await receive()
            await send({"type": "lifespan.shutdown.complete"})
            return
        await hello(scope, receive, send)

    sock = server_module.bind_socket("127.0.0.1", 0)
    url = server_module.url_of(sock)
    uvicorn = server_module.uvicorn_server(slow_startup)
    announced = threading.Event()
    started_then: list[bool] = []

    def on_started() -> None:
        started_then.append(uvicorn.started)
        announced.set()

    thread = threading.Thread(
        target=server_module.run_server, args=(uvicorn, [sock]), kwargs={"on_started": on_started}
    )
    thread.start()
    try:
        assert not announced.is_set()  # startup cannot be done: the test holds it
        release.set()
        assert announced.wait(60), "hang guard: the server never announced itself"
        assert started_then == [True]
        assert httpx.get(url, timeout=60).text == "hello"  # the first try is answered
    finally:
        release.set()
        uvicorn.should_exit = True
        thread.join(60)
    assert not thread.is_alive()


def test_freeze_heap_collects_the_garbage_then_freezes_what_is_alive() -> None:
    """``agentsgym serve``'s freeze_heap, in a process of its own (it changes the
    process's collector): a cycle that is already garbage is collected first, not
    frozen; what is alive is frozen, so that full collections no longer walk it."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(
        """
        import gc, weakref
        from agentsgym_serve.server import freeze_heap

        class Node:
            pass

        garbage, alive = Node(), Node()
        garbage.me, alive.me = garbage, alive
        gone = weakref.ref(garbage)
        del garbage
        frozen = freeze_heap()
        assert gone() is None, "the garbage was frozen, not collected"
        assert frozen == gc.get_freeze_count() > 1000, frozen
        assert all(o is not alive for o in gc.get_objects(2)), "what is alive is frozen"
        print(frozen)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 1000
