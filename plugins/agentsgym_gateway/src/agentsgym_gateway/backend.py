"""The model backend behind the gateway: an OpenAI-compatible server, over HTTP.

vLLM (``return_token_ids``), agentsgym-serve's loopback server and llama.cpp's
``llama-server`` all answer ``/v1/chat/completions`` and ``/v1/completions``. The
backend's own key, if it needs one, is sent by the gateway and never seen by the
program, a record or a log line.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from agentsgym_gateway.jsonio import parse_answer, rewrite

BACKEND_TIMEOUT_SECONDS = 600.0
"""A long generation on a loaded server takes minutes; the episode's own timeout
bounds a program, not this."""


@dataclass
class BackendAnswer:
    status: int
    content: bytes
    media_type: str
    _parsed: tuple[Any, bool] | None = field(default=None, repr=False)

    def _parse(self) -> tuple[Any, bool]:
        if self._parsed is None:
            self._parsed = parse_answer(self.content)
        return self._parsed

    def json(self) -> Any:
        """The body as JSON (parsed once; ``json.loads``'s values, by orjson where exact)."""
        return self._parse()[0]

    def rewrite(self, view: Any) -> bytes:
        """``view``, this answer's JSON with fields taken out or changed, written as the
        backend writes JSON (:func:`agentsgym_gateway.jsonio.rewrite`)."""
        return rewrite(view, self._parse()[1])


@dataclass
class BackendStream:
    """A backend's streamed answer (HTTP 200), read as its bytes arrive."""

    media_type: str
    chunks: AsyncIterator[bytes]
    close: Callable[[], None]
    """Ends the backend's request (the program stopped reading, or the stream ended)."""


class Backend:
    """Forwards bodies to ``base_url`` (``http://host:port/v1``) on one connection pool
    (aiohttp's: its pool stays fast with a thousand connections open). A call's
    ``context`` (the episode of the program that made it) is not sent: a server answers
    every program alike."""

    def __init__(self, base_url: str, api_key: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._session: aiohttp.ClientSession | None = None

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            # No cap on connections: the backend's own queue decides, as it would for
            # the programs calling it directly.
            connector = aiohttp.TCPConnector(limit=0)
            timeout = aiohttp.ClientTimeout(total=BACKEND_TIMEOUT_SECONDS)
            self._session = aiohttp.ClientSession(connector=connector, timeout=timeout)
        return self._session

    async def post(self, path: str, body: bytes, context: Any = None) -> BackendAnswer:
        headers = {**self._headers(), "Content-Type": "application/json"}
        url = self.base_url + path
        async with self.session.post(url, data=body, headers=headers) as answer:
            content = await answer.read()
            kind = answer.headers.get("content-type", "application/json")
            return BackendAnswer(answer.status, content, kind)

    async def open_stream(
        self, path: str, body: bytes, context: Any = None
    ) -> BackendAnswer | BackendStream:
        """A streaming request: its stream once the backend answered 200, else the
        complete (error) answer."""
        headers = {**self._headers(), "Content-Type": "application/json"}
        answer = await self.session.post(self.base_url + path, data=body, headers=headers)
        kind = answer.headers.get("content-type", "application/json")
        if answer.status != 200 or not kind.startswith("text/event-stream"):
            try:
                return BackendAnswer(answer.status, await answer.read(), kind)
            finally:
                answer.release()
        return BackendStream(kind, answer.content.iter_any(), answer.close)

    async def get(self, path: str) -> BackendAnswer:
        async with self.session.get(self.base_url + path, headers=self._headers()) as answer:
            content = await answer.read()
            kind = answer.headers.get("content-type", "application/json")
            return BackendAnswer(answer.status, content, kind)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
