"""Request bodies over the server's limit (issue 21.3): answered 413 with a JSON error on
every route, without reading the body whole. The limit's logic is driven at the ASGI
level (exactly which chunks are read); the real server is checked with requests whose
outcome does not depend on timing (a length declared but never sent, a body within
the limit)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentsgym_serve import create_app
from agentsgym_serve.app import DEFAULT_MAX_BODY_BYTES, BodyLimitMiddleware
from serve_helpers import GUESS, served

pytestmark = pytest.mark.timeout(120)
V1 = "/agentsgym/v1"
LIMIT = 1000


class Reply:
    """What an ASGI app sent, and how many body chunks it was given."""

    def __init__(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = b""
        self.reads = 0

    def json(self) -> Any:
        return json.loads(self.body)


def call(
    app: Any, path: str, chunks: list[bytes], *, length: int | None = None, method: str = "POST"
) -> Reply:
    """One HTTP request through ``app``: the body in ``chunks`` (chunked when ``length``
    is None, else with that Content-Length)."""
    reply = Reply()
    pending = list(chunks)
    headers = [(b"content-type", b"application/json")]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    else:
        headers.append((b"transfer-encoding", b"chunked"))

    async def receive() -> dict[str, Any]:
        if not pending:
            return {"type": "http.disconnect"}
        reply.reads += 1
        body = pending.pop(0)
        return {"type": "http.request", "body": body, "more_body": bool(pending)}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            reply.status = message["status"]
            reply.headers = {k.decode(): v.decode() for k, v in message["headers"]}
        else:
            reply.body += message.get("body", b"")

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    asyncio.run(app(scope, receive, send))
    return reply


async def echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Reads its whole body and answers its length."""
    size, more = 0, True
    while more:
        message = await receive()
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(size).encode()})


async def forgiving(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers a failed body read itself, as FastAPI does (with a 400)."""
    try:
        await echo(scope, receive, send)
    except Exception:  # noqa: BLE001
        await send({"type": "http.response.start", "status": 400, "headers": []})
        await send({"type": "http.response.body", "body": b"could not read the body"})


def assert_too_large(reply: Reply, limit: int = LIMIT) -> None:
    assert reply.status == 413
    assert reply.headers["content-type"] == "application/json"
    assert reply.headers["connection"] == "close"  # the rest of the upload is not drained
    body = reply.json()
    assert body["error"] == "body_too_large" and body["max_body_bytes"] == limit
    assert f"limit of {limit} bytes" in body["detail"] and "--max-body-bytes" in body["detail"]


def test_a_declared_length_over_the_limit_is_refused_unread() -> None:
    app = BodyLimitMiddleware(echo, max_body_bytes=LIMIT)
    reply = call(app, "/x", [b"x" * (LIMIT + 1)], length=LIMIT + 1)
    assert_too_large(reply)
    assert reply.reads == 0
    assert "of 1001 bytes" in reply.json()["detail"]


@pytest.mark.parametrize("inner", [echo, forgiving])
def test_a_chunked_body_is_counted_as_it_streams_and_stopped_at_the_limit(inner: Any) -> None:
    app = BodyLimitMiddleware(inner, max_body_bytes=LIMIT)
    chunks = [b"x" * 100] * 100  # 10 kB, ten times the limit
    reply = call(app, "/x", chunks)
    assert_too_large(reply)
    assert reply.reads == 11  # the chunk that crossed the limit was the last one read


def test_bodies_up_to_the_limit_pass_whole() -> None:
    app = BodyLimitMiddleware(echo, max_body_bytes=LIMIT)
    assert call(app, "/x", [b"x" * 100] * 10).body == b"1000"  # chunked, exactly the limit
    assert call(app, "/x", [b"x" * LIMIT], length=LIMIT).body == b"1000"
    assert call(app, "/x", [b"x" * 999], length=999).body == b"999"


def test_a_body_longer_than_its_declared_length_is_still_counted() -> None:
    # (servers frame bodies by Content-Length, but an ASGI app may sit behind anything)
    reply = call(BodyLimitMiddleware(echo, max_body_bytes=LIMIT), "/x", [b"x" * 600] * 2, length=10)
    assert_too_large(reply)


@pytest.mark.parametrize(
    "path",
    ["/step", "/reset", "/close", f"{V1}/sessions", f"{V1}/sessions/1/step", f"{V1}/env/config"],
)
def test_every_route_of_the_app_refuses_a_chunked_body_over_the_limit(path: str) -> None:
    app = create_app(GUESS, max_body_bytes=LIMIT)
    try:
        # valid JSON that only grows: the read, not the JSON, is what fails
        chunks = [b'{"action": "', *[b"x" * 100] * 20, b'"}']
        assert_too_large(call(app, path, chunks))
        assert_too_large(call(app, path, [b"{}"], length=10**8))
    finally:
        app.state.service.host.close()


def test_the_default_limit_is_one_mebibyte_and_the_option_must_be_positive() -> None:
    assert DEFAULT_MAX_BODY_BYTES == 1 << 20
    with pytest.raises(ValueError, match="max_body_bytes"):
        create_app(GUESS, max_body_bytes=0)


@pytest.fixture(scope="module")
def small_server() -> Iterator[Any]:
    with served(GUESS, max_body_bytes=LIMIT) as server:
        yield server


def raw_request(url: str, head: str) -> bytes:
    """Send only a request head (no body) and read the reply until the server closes."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head.encode("ascii"))
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return reply


@pytest.mark.parametrize(
    ("method", "path", "length"),
    [
        ("POST", "/step", 100 * 2**20),
        ("POST", f"{V1}/sessions", 100 * 2**20),
        ("POST", f"{V1}/sessions", LIMIT + 1),
        ("GET", "/health", 100 * 2**20),
    ],
)
def test_the_server_answers_a_declared_length_over_the_limit_at_once_and_closes(
    small_server: Any, method: str, path: str, length: int
) -> None:
    # The body is never sent: the answer cannot have waited for it (and no unread
    # upload is left for the closing server to reset the connection over).
    head = (
        f"{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        f"content-length: {length}\r\n\r\n"
    )
    status_line, _, rest = raw_request(small_server.url, head).partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 413")
    body = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert body["error"] == "body_too_large" and body["max_body_bytes"] == LIMIT
    with httpx.Client(base_url=small_server.url) as http:
        assert http.get("/health").json()["status"] == "healthy"  # still serving


def test_the_server_takes_a_body_of_exactly_the_limit(small_server: Any) -> None:
    body = json.dumps({"task_data": {"seed": 3}}).encode()
    padded = body + b" " * (LIMIT - len(body))  # JSON may end in white space
    json_type = {"content-type": "application/json"}
    with httpx.Client(base_url=small_server.url, headers=json_type) as http:
        created = http.post(f"{V1}/sessions", content=padded)
        assert created.status_code == 200
        session = created.json()
        streamed = http.post(  # chunked: no Content-Length
            f"{V1}/sessions/{session['id']}/close",
            content=iter([json.dumps({"token": session["token"]}).encode(), b" " * 900]),
        )
        assert streamed.status_code == 200 and streamed.json()["closed"] is True


def test_the_openapi_schema_documents_the_413(small_server: Any) -> None:
    with httpx.Client(base_url=small_server.url) as http:
        paths = http.get("/openapi.json").json()["paths"]
    assert all("413" in item["responses"] for path in paths.values() for item in path.values())
