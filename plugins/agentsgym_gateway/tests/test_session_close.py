"""A session closed while a call is in flight: the call is not recorded, and its program
is not given the answer either (HTTP 410, or an error event in place of a stream's end),
so the records hold exactly the calls the program was answered."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest

from agentsgym_gateway import ModelGateway
from agentsgym_gateway.backend import BackendAnswer, BackendStream
from gateway_fixtures import MODEL, FakeBackend

MESSAGES = [{"role": "user", "content": "Say hello."}]
ANSWER = {
    "id": "c",
    "object": "chat.completion",
    "created": 0,
    "model": MODEL,
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "hello"},
            "finish_reason": "stop",
            "token_ids": [7, 8],
        }
    ],
    "prompt_token_ids": [1, 2, 3],
}


class HeldBackend(FakeBackend):
    """Holds each call until released, and says when one reached it."""

    base_url = "held://"

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()

    async def _held(self) -> None:
        self.reached.set()
        assert await asyncio.to_thread(self.release.wait, 60), "never released"

    async def post(self, path: str, body: bytes, context: Any = None) -> BackendAnswer:
        await self._held()
        return BackendAnswer(200, json.dumps(ANSWER).encode(), "application/json")

    async def open_stream(self, path: str, body: bytes, context: Any = None) -> BackendStream:
        def event(payload: dict[str, Any]) -> bytes:
            return b"data: " + json.dumps(payload).encode() + b"\n\n"

        async def chunks() -> AsyncIterator[bytes]:
            head = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": MODEL}
            delta = {"index": 0, "delta": {"content": "hel"}, "token_ids": [7]}
            yield event({**head, "prompt_token_ids": [1, 2, 3], "choices": [delta]})
            await self._held()
            last = {"index": 0, "delta": {"content": "lo"}, "token_ids": [8]}
            yield event({**head, "choices": [{**last, "finish_reason": "stop"}]})
            yield b"data: [DONE]\n\n"

        return BackendStream("text/event-stream", chunks(), lambda: None)


def test_a_call_in_flight_when_its_session_closes_is_refused_not_answered() -> None:
    backend = HeldBackend()
    with ModelGateway(backend=backend) as gateway, ThreadPoolExecutor(1) as pool:
        session = gateway.open_session()
        headers = {"Authorization": f"Bearer {session.api_key}"}
        body = {"model": MODEL, "messages": MESSAGES}
        url = f"{session.base_url}/chat/completions"
        answer = pool.submit(httpx.post, url, json=body, headers=headers, timeout=120)
        assert backend.reached.wait(60)
        calls = gateway.close_session(session)  # the call is still at the backend
        backend.release.set()
        refused = answer.result(timeout=120)
    assert calls == []
    assert refused.status_code == 410
    error = refused.json()["error"]
    assert error["code"] == "session_closed" and "not recorded" in error["message"]


def test_a_stream_in_flight_when_its_session_closes_ends_with_an_error() -> None:
    backend = HeldBackend()

    def read(session: Any) -> str:
        client = openai.OpenAI(base_url=session.base_url, api_key=session.api_key)
        stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
        return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    with ModelGateway(backend=backend) as gateway, ThreadPoolExecutor(1) as pool:
        session = gateway.open_session()
        program = pool.submit(read, session)
        assert backend.reached.wait(60)  # its first event has been forwarded
        calls = gateway.close_session(session)
        backend.release.set()
        with pytest.raises(openai.APIError, match="closed while the call was in flight"):
            program.result(timeout=120)
    assert calls == []


def test_a_call_answered_before_the_close_is_in_the_records() -> None:
    backend = HeldBackend()
    backend.release.set()
    with ModelGateway(backend=backend) as gateway:
        session = gateway.open_session()
        client = openai.OpenAI(base_url=session.base_url, api_key=session.api_key)
        stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        answer = client.chat.completions.create(model=MODEL, messages=MESSAGES)
        calls = gateway.close_session(session)
    assert text == "hello" == answer.choices[0].message.content
    assert [c.completion_token_ids for c in calls] == [[7, 8], [7, 8]]
