"""A program that streams gets the backend's own stream, forwarded as it comes, and the
call is recorded from the stream's ids (or retokenized when the stream has none)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai

from agentsgym_gateway import ModelGateway
from agentsgym_gateway.backend import BackendAnswer, BackendStream
from gateway_fixtures import MODEL, FakeBackend, gateway_over

MESSAGES = [{"role": "user", "content": "Say hello."}]
_VOLATILE = re.compile(rb'"(id|created)":("[^"]*"|\d+)')


def _stable(raw: bytes) -> bytes:
    """A stream's bytes with its id and creation time blanked (they differ per request)."""
    return _VOLATILE.sub(rb'"\1":_', raw)


def _post_stream(url: str, body: dict[str, Any], key: str | None = None) -> bytes:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with httpx.stream("POST", url, json=body, headers=headers) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        return answer.read()


def _events(raw: bytes) -> list[bytes]:
    return [event for event in raw.split(b"\n\n") if event]


def test_the_program_gets_the_backends_stream_byte_for_byte() -> None:
    with gateway_over(["streamed words, one token at a time"]) as (gateway, server):
        session = gateway.open_session()
        for extra in ({}, {"return_token_ids": True, "logprobs": True}):
            body = {"model": MODEL, "messages": MESSAGES, "stream": True, **extra}
            options = {"stream_options": {"include_usage": True}}
            for request in (body, {**body, **options}):
                url = f"{session.base_url}/chat/completions"
                through = _post_stream(url, request, session.api_key)
                direct = _post_stream(f"{server.base_url}/chat/completions", request)
                assert _stable(through) == _stable(direct)
                # the backend's stream, one event per token: not a complete answer re-cut
                assert len(_events(through)) > 8
        completion = {"model": MODEL, "prompt": "Say", "stream": True}
        through = _post_stream(f"{session.base_url}/completions", completion, session.api_key)
        direct = _post_stream(f"{server.base_url}/completions", completion)
        assert _stable(through) == _stable(direct)
        calls = gateway.close_session(session)
    assert len(calls) == 5 and all(c.ok for c in calls)
    assert calls[-1].endpoint == "completions" and calls[-1].token_source == "server"


def test_a_streamed_call_is_recorded_with_the_ids_of_the_stream() -> None:
    with gateway_over(["hello there, streamed"]) as (gateway, server):
        session = gateway.open_session()
        client = openai.OpenAI(base_url=session.base_url, api_key=session.api_key)
        chunks = list(client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True))
        whole = httpx.post(
            f"{server.base_url}/chat/completions",
            json={"model": MODEL, "messages": MESSAGES, "return_token_ids": True},
        ).json()
        (call,) = gateway.close_session(session)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "hello there, streamed"
    assert call.token_source == "server" and call.text == "hello there, streamed"
    assert call.prompt_token_ids == whole["prompt_token_ids"]
    assert call.completion_token_ids == whole["choices"][0]["token_ids"]
    assert call.logprobs == [0.0] * len(call.completion_token_ids)
    assert call.finish_reason == "stop" and call.messages == MESSAGES
    # the program did not ask for ids or logprobs: its chunks carry none
    assert all(c.choices[0].logprobs is None for c in chunks if c.choices)
    assert all("token_ids" not in (c.choices[0].model_extra or {}) for c in chunks if c.choices)


def test_a_streamed_reply_of_multibyte_text_joins_to_the_reply_and_its_ids() -> None:
    reply = "Grüße, 世界 ✓ — done."
    with gateway_over([reply]) as (gateway, server):
        session = gateway.open_session()
        client = openai.OpenAI(base_url=session.base_url, api_key=session.api_key)
        stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        whole = httpx.post(
            f"{server.base_url}/chat/completions",
            json={"model": MODEL, "messages": MESSAGES, "return_token_ids": True},
        ).json()
        (call,) = gateway.close_session(session)
    assert text == reply == call.text
    assert call.completion_token_ids == whole["choices"][0]["token_ids"]


def test_a_stream_without_ids_gives_a_retokenized_record() -> None:
    with gateway_over(["plain streamed text"], vllm=False) as (gateway, _):
        session = gateway.open_session()
        client = openai.OpenAI(base_url=session.base_url, api_key=session.api_key)
        for _ in range(2):  # the first call learns that the backend refuses return_token_ids
            stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
            text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
            assert text == "plain streamed text"
        calls = gateway.close_session(session)
    assert [c.token_source for c in calls] == ["retokenized", "retokenized"]
    assert calls[0].text == "plain streamed text" and calls[0].completion_token_ids is None


class _HeldStream(FakeBackend):
    """A streaming backend that sends its second event only once the first reached the
    program: a gateway that waited for the whole answer would never forward it."""

    base_url = "held://"

    def __init__(self) -> None:
        self.first_seen = threading.Event()

    async def open_stream(self, path: str, body: bytes, context: Any = None) -> BackendStream:
        import asyncio

        def event(payload: dict[str, Any]) -> bytes:
            return b"data: " + json.dumps(payload).encode() + b"\n\n"

        def chunk(text: str, ids: list[int], finish: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": {"content": text}, "token_ids": ids}
            return {"id": "c", "choices": [{**choice, "finish_reason": finish}]}

        async def chunks() -> AsyncIterator[bytes]:
            yield event({"id": "c", "prompt_token_ids": [1, 2], **chunk("first ", [3])})
            seen = await asyncio.to_thread(self.first_seen.wait, 60)
            yield event(chunk("second" if seen else "never forwarded", [4], "stop"))
            yield b"data: [DONE]\n\n"

        return BackendStream("text/event-stream", chunks(), lambda: None)

    async def post(self, path: str, body: bytes, context: Any = None) -> BackendAnswer:
        raise AssertionError("a streaming request is streamed from the backend")


def test_events_reach_the_program_as_the_backend_sends_them() -> None:
    backend = _HeldStream()
    with ModelGateway(backend=backend) as gateway:
        session = gateway.open_session()
        body = {
            "model": MODEL,
            "messages": MESSAGES,
            "stream": True,
            "return_token_ids": True,
            "logprobs": True,
        }
        headers = {"Authorization": f"Bearer {session.api_key}"}
        received = b""
        url = f"{session.base_url}/chat/completions"
        with httpx.stream("POST", url, json=body, headers=headers, timeout=120) as answer:
            for piece in answer.iter_bytes():
                received += piece
                if b"first" in received:
                    backend.first_seen.set()
        (call,) = gateway.close_session(session)
    assert b"second" in received and b"never forwarded" not in received
    assert call.prompt_token_ids == [1, 2] and call.completion_token_ids == [3, 4]
    assert call.text == "first second" and call.finish_reason == "stop"
