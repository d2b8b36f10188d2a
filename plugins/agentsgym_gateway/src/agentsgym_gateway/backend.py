"""The model backend behind the gateway: an OpenAI-compatible server, over HTTP.

vLLM (``return_token_ids``), agentsgym-serve's loopback server and llama.cpp's
``llama-server`` all answer ``/v1/chat/completions`` and ``/v1/completions``. The
backend's own key, if it needs one, is sent by the gateway and never seen by the
program, a record or a log line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

BACKEND_TIMEOUT_SECONDS = 600.0
"""A long generation on a loaded server takes minutes; the episode's own timeout
bounds a program, not this."""


@dataclass(frozen=True)
class BackendAnswer:
    status: int
    content: bytes
    media_type: str

    def json(self) -> Any:
        import json

        return json.loads(self.content)


class Backend:
    """Forwards bodies to ``base_url`` (``http://host:port/v1``) on one connection pool."""

    def __init__(self, base_url: str, api_key: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._client: httpx.AsyncClient | None = None

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            # No cap on connections: the backend's own queue decides, as it would for
            # the programs calling it directly.
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=256)
            self._client = httpx.AsyncClient(timeout=BACKEND_TIMEOUT_SECONDS, limits=limits)
        return self._client

    async def post(self, path: str, body: bytes) -> BackendAnswer:
        headers = {**self._headers(), "Content-Type": "application/json"}
        answer = await self.client.post(self.base_url + path, content=body, headers=headers)
        return BackendAnswer(
            answer.status_code,
            answer.content,
            answer.headers.get("content-type", "application/json"),
        )

    async def get(self, path: str) -> BackendAnswer:
        answer = await self.client.get(self.base_url + path, headers=self._headers())
        return BackendAnswer(
            answer.status_code,
            answer.content,
            answer.headers.get("content-type", "application/json"),
        )

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
