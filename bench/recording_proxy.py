"""A recording HTTP proxy: what a model server was asked and what it answered, as bytes.

bench/bench_vllm_fidelity.py puts it between agentsgym (the ``openai`` agent, the
model gateway, a trainer) and a real vLLM server, so that the audit
(bench/check_vllm_records.py) reads the server's own answers, not agentsgym's reading
of them. Every request is forwarded as it came (method, path, query, body); every
answer goes back as it came, a stream event by event as it arrives. Each exchange is
kept as ``{"tag", "method", "path", "request", "status", "response"}``: ``request`` the
JSON body (or ``None``), ``response`` the answer's text (a stream's whole text, its
``data:`` lines included). ``tag`` is whatever the bench set last (the arm being run).
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

from agentsgym_serve import BackgroundServer
from gateway_overhead import read_body

if TYPE_CHECKING:
    from typing_extensions import Self

HOP_HEADERS = {"content-length", "transfer-encoding", "connection", "host"}


class RecordingProxy:
    """``with RecordingProxy("http://127.0.0.1:8000") as proxy:`` serves ``proxy.url``."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.tag = ""
        self.exchanges: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._client: Any = None

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            await self._forward(scope, receive, send)

        self._server = BackgroundServer(app, name="recording-proxy")
        self.url = ""

    def __enter__(self) -> Self:
        self._server.start()
        self.url = self._server.url
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()

    def take(self, tag: str) -> list[dict[str, Any]]:
        """The exchanges recorded under ``tag`` (removed from the log)."""
        with self._lock:
            taken = [e for e in self.exchanges if e["tag"] == tag]
            self.exchanges = [e for e in self.exchanges if e["tag"] != tag]
        return taken

    async def _forward(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        import aiohttp

        if scope["type"] == "lifespan":
            return await self._lifespan(receive, send)
        if self._client is None:
            timeout = aiohttp.ClientTimeout(total=None, sock_read=1800)
            self._client = aiohttp.ClientSession(timeout=timeout, auto_decompress=False)
        tag = self.tag
        body = await read_body(receive)
        query = scope.get("query_string", b"").decode()
        url = self.target + scope["path"] + (f"?{query}" if query else "")
        headers = {
            k.decode(): v.decode()
            for k, v in scope["headers"]
            if k.decode().lower() not in HOP_HEADERS
        }
        chunks: list[bytes] = []
        async with self._client.request(scope["method"], url, data=body, headers=headers) as reply:
            answer_headers = [
                (k.lower().encode(), v.encode())
                for k, v in reply.headers.items()
                if k.lower() not in HOP_HEADERS
            ]
            await send(
                {"type": "http.response.start", "status": reply.status, "headers": answer_headers}
            )
            async for chunk in reply.content.iter_any():
                chunks.append(chunk)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        exchange = {
            "tag": tag,
            "method": scope["method"],
            "path": scope["path"],
            "request": _json_or_none(body),
            "status": reply.status,
            "response": b"".join(chunks).decode("utf-8", "replace"),
        }
        with self._lock:
            self.exchanges.append(exchange)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        """Start up at once; close the client to the target at shutdown."""
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        if self._client is not None:
            await self._client.close()
        await send({"type": "lifespan.shutdown.complete"})


def _json_or_none(body: bytes) -> Any:
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None
