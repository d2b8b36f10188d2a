"""A complete answer as the Server-Sent Events stream OpenAI's API would send.

A program that streams gets the backend's own stream where the backend streams
(:mod:`agentsgym_gateway.relay`). Where the gateway answers from a complete answer
instead (a tool parser rewrites the reply, ``n`` above 1 is checked whole, an agent
backend, the Responses API), the program receives that answer in OpenAI's chunk
format: the role, the text, each tool call, the finish reason, usage when
``stream_options`` asked for it, then ``data: [DONE]``. The text is the same text;
only its split into chunks differs from a streaming backend's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agentsgym_gateway.jsonio import dumps


def _event(payload: dict[str, Any]) -> bytes:
    return b"data: " + dumps(payload) + b"\n\n"


def chat_events(response: dict[str, Any], include_usage: bool) -> Iterator[bytes]:
    """The chunks of a chat completion."""
    head = {
        "id": response.get("id"),
        "object": "chat.completion.chunk",
        "created": response.get("created"),
        "model": response.get("model"),
    }
    for choice in response.get("choices") or []:
        index = choice.get("index", 0)
        message = choice.get("message") or {}

        def chunk(delta: dict[str, Any], finish: str | None = None, i: int = index) -> bytes:
            return _event(
                {
                    **head,
                    "choices": [
                        {"index": i, "delta": delta, "logprobs": None, "finish_reason": finish}
                    ],
                }
            )

        yield chunk({"role": "assistant", "content": ""})
        if message.get("content"):
            yield chunk({"content": message["content"]})
        for position, call in enumerate(message.get("tool_calls") or []):
            yield chunk({"tool_calls": [{"index": position, **call}]})
        yield chunk({}, choice.get("finish_reason") or "stop")
    if include_usage:
        yield _event({**head, "choices": [], "usage": response.get("usage")})
    yield b"data: [DONE]\n\n"


def completion_events(response: dict[str, Any], include_usage: bool) -> Iterator[bytes]:
    """The chunks of a text completion."""
    head = {
        "id": response.get("id"),
        "object": "text_completion",
        "created": response.get("created"),
        "model": response.get("model"),
    }
    for choice in response.get("choices") or []:
        index = choice.get("index", 0)
        text = {"index": index, "text": choice.get("text") or "", "logprobs": None}
        yield _event({**head, "choices": [{**text, "finish_reason": None}]})
        done = {"index": index, "text": "", "logprobs": None}
        yield _event({**head, "choices": [{**done, "finish_reason": choice.get("finish_reason")}]})
    if include_usage:
        yield _event({**head, "choices": [], "usage": response.get("usage")})
    yield b"data: [DONE]\n\n"


def response_events(response: dict[str, Any]) -> Iterator[bytes]:
    """The events of a Responses API answer: created, each output item with its text or
    arguments, completed (``event:`` lines name each, as OpenAI's stream does)."""
    sequence = iter(range(1 << 30))

    def event(kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": next(sequence), **fields}
        return f"event: {kind}\n".encode() + _event(payload)

    opening = {**response, "status": "in_progress", "output": [], "usage": None}
    yield event("response.created", response=opening)
    yield event("response.in_progress", response=opening)
    for index, item in enumerate(response.get("output") or []):
        where = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            for position, part in enumerate(item["content"]):
                at = {**where, "content_index": position}
                empty = {**part, "text": ""}
                yield event("response.content_part.added", **at, part=empty)
                yield event("response.output_text.delta", **at, delta=part["text"], logprobs=[])
                yield event("response.output_text.done", **at, text=part["text"], logprobs=[])
                yield event("response.content_part.done", **at, part=part)
        else:
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            yield event("response.function_call_arguments.delta", **where, delta=item["arguments"])
            yield event(
                "response.function_call_arguments.done", **where, arguments=item["arguments"]
            )
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=response)
