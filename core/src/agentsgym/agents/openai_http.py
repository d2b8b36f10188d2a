"""JSON over HTTP to an OpenAI-compatible server, on aiohttp.

Not the ``openai`` SDK: its typed requests and responses cost about 1 ms of CPU each
(0.63 s against aiohttp's 0.24 s for 640 requests, bench/bench_engine.py), which at 64
concurrent episodes bounds a rollout process before the model server does; and the
agent needs only three requests and their raw JSON, with vLLM's extra fields.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

IDLE_CONNECTION_SECONDS = 4.0
"""Under uvicorn's (vLLM's) 5 s keep-alive: the client drops an idle connection before
the server closes it under a request."""


class ServerStatusError(Exception):
    """The server answered with an HTTP error status."""

    def __init__(self, status: int, body: Any, text: str) -> None:
        self.status, self.body, self.text = status, body, text
        self.message = error_message(body, text)
        super().__init__(f"HTTP {status}: {self.message}")


class ServerUnreachable(Exception):
    """No connection to the server (refused, reset, DNS, TLS)."""


class ServerTimeout(Exception):
    """The server did not answer within the request timeout."""


class ServerProtocolError(Exception):
    """The server answered 2xx with something that is not the JSON expected."""


def error_message(body: Any, text: str = "") -> str:
    """The human message of an error body (OpenAI's and vLLM's shapes)."""
    if isinstance(body, dict):
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        message = inner.get("message") or body.get("detail")
        if message:
            text = str(message)
    # One line: servers answer with whole validation reports (llama.cpp's run to 70 lines).
    line = " ".join(text.split())
    return (line[:300] + " [...]" if len(line) > 300 else line) or "(empty body)"


class JSONClient:
    """One aiohttp session (one connection pool), for one event loop."""

    def __init__(self, base_url: str, api_key: str, timeout: float, max_connections: int) -> None:
        import aiohttp

        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._session = aiohttp.ClientSession(
            headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json"},
            connector=aiohttp.TCPConnector(
                limit=max_connections,
                limit_per_host=max_connections,
                keepalive_timeout=IDLE_CONNECTION_SECONDS,
            ),
            timeout=aiohttp.ClientTimeout(total=timeout),
            json_serialize=json.dumps,
        )

    async def request(self, method: str, path: str, payload: Any = None) -> Any:
        """The decoded JSON answer (``path``: under ``base_url``, or a whole URL on the same
        server); raises ServerStatusError, ServerUnreachable, ServerTimeout."""
        import aiohttp

        url = path if path.startswith(("http://", "https://")) else self.base_url + path
        for attempt in range(2):
            try:
                async with self._session.request(method, url, json=payload) as response:
                    text = await response.text()
                    status = response.status
                break
            except asyncio.TimeoutError as exc:
                raise ServerTimeout(f"no answer within {self.timeout:g}s") from exc
            except aiohttp.ClientError as exc:
                # A pooled connection the server closed while it sat idle is sent again on
                # a fresh one, whatever the retry budget (it is not a server failure).
                if attempt or not isinstance(exc, aiohttp.ServerDisconnectedError):
                    raise ServerUnreachable(f"{type(exc).__name__}: {exc}") from exc
        try:
            body = json.loads(text) if text else None
        except ValueError:
            body = None
        if status >= 400:
            raise ServerStatusError(status, body, text)
        if body is None:
            raise ServerProtocolError(f"the answer to {path} is not JSON: {text[:200]!r}")
        return body

    @property
    def closed(self) -> bool:
        return bool(self._session.closed)

    async def close(self) -> None:
        await self._session.close()

    def abandon(self) -> None:
        """Close the connections without the session's loop (that loop is gone)."""
        connector = self._session.connector
        self._session.detach()
        if connector is not None:
            connector._close()
