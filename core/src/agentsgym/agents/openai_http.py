"""JSON over HTTP to an OpenAI-compatible server, on aiohttp.

The OpenAI agent needs three requests (``POST /chat/completions``, ``POST
/completions``, ``GET /models``) and the raw JSON of their answers, including the
fields vLLM adds (``prompt_token_ids``, ``token_ids``). The ``openai`` SDK spends about
1 ms of CPU per request on building typed requests and responses (measured in
bench/bench_engine.py: 0.63 s of client CPU for 640 chat requests against 0.24 s
with aiohttp), which at 64 concurrent episodes, not the model server, bounds a
rollout process. So the agent speaks HTTP itself, on aiohttp, and maps failures to
three exceptions its retry logic understands.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

IDLE_CONNECTION_SECONDS = 4.0
"""How long an idle pooled connection is kept: under uvicorn's 5 s keep-alive (vLLM's
server), so the client drops a connection before the server closes it under a
request."""


class ServerStatusError(Exception):
    """The server answered with an HTTP error status."""

    def __init__(self, status: int, body: Any, text: str) -> None:
        self.status = status
        self.body = body
        self.text = text
        super().__init__(f"HTTP {status}: {error_message(body, text)}")

    @property
    def message(self) -> str:
        return error_message(self.body, self.text)


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
        message = inner.get("message") if isinstance(inner, dict) else None
        if message:
            return str(message)
        detail = body.get("detail")
        if detail:
            return str(detail)
    return text[:300] or "(empty body)"


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
        """The decoded JSON answer; raises ServerStatusError, ServerUnreachable, ServerTimeout."""
        import aiohttp

        for attempt in range(2):
            try:
                async with self._session.request(
                    method, self.base_url + path, json=payload
                ) as response:
                    text = await response.text()
                    status = response.status
                break
            except asyncio.TimeoutError as exc:
                raise ServerTimeout(f"no answer within {self.timeout:g}s") from exc
            except aiohttp.ServerDisconnectedError as exc:
                # A pooled connection the server closed while it sat idle: sent again on
                # a fresh one, whatever the retry budget (it is not a server failure).
                if attempt:
                    raise ServerUnreachable(f"{type(exc).__name__}: {exc}") from exc
            except aiohttp.ClientError as exc:
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

    async def close(self) -> None:
        await self._session.close()
