"""The relay puts a backend's stream back together for the record, and strips exactly the
fields the gateway added from each event, whatever the network's split of the bytes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from agentsgym_gateway.relay import StreamAssembler, StreamRelay
from agentsgym_gateway.wire import record_of


def _event(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def _chunk(delta: dict[str, Any], ids: list[int], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "token_ids": ids, "finish_reason": finish}
    return {"id": "c", "choices": [choice]}


def _call_delta(arguments: str, **head: Any) -> dict[str, Any]:
    function = {"arguments": arguments, **({"name": head.pop("name")} if "name" in head else {})}
    return {"tool_calls": [{"index": 0, **head, "function": function}]}


TOOL_STREAM = [  # vLLM's chat stream of a parsed tool call, with return_token_ids
    {**_chunk({"role": "assistant", "content": ""}, []), "prompt_token_ids": [1, 2, 3]},
    _chunk(_call_delta("", id="call_1", type="function", name="add"), [7, 8]),
    _chunk(_call_delta('{"a": 1, '), [9]),
    _chunk(_call_delta('"b": 2}'), [10]),
    _chunk({}, [11], "tool_calls"),
]


def test_a_streamed_tool_call_is_recorded_whole() -> None:
    assembler = StreamAssembler("chat")
    for chunk in TOOL_STREAM:
        assembler.feed(chunk)
    record = record_of("chat", {"messages": []}, assembler.response())
    assert record.prompt_token_ids == [1, 2, 3]
    assert record.completion_token_ids == [7, 8, 9, 10, 11]
    assert record.finish_reason == "tool_calls" and record.text == ""
    (call,) = record.tool_calls
    assert call["id"] == "call_1" and call["function"]["name"] == "add"
    assert json.loads(call["function"]["arguments"]) == {"a": 1, "b": 2}


def test_a_completions_stream_carries_its_prompt_ids_on_the_choice() -> None:
    assembler = StreamAssembler("completions")
    chunks = [
        {"choices": [{"index": 0, "text": "4", "prompt_token_ids": [5, 6], "token_ids": [40]}]},
        {"choices": [{"index": 0, "text": "2", "token_ids": [41], "finish_reason": "stop"}]},
    ]
    for chunk in chunks:
        assembler.feed(chunk)
    record = record_of("completions", {"prompt": "6 x 7 ="}, assembler.response())
    assert record.prompt_token_ids == [5, 6] and record.completion_token_ids == [40, 41]
    assert record.text == "42" and record.token_source == "server"


async def _pieces(raw: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(raw), size):
        yield raw[start : start + size]


async def _relayed(relay: StreamRelay, raw: bytes, size: int) -> bytes:
    return b"".join([piece async for piece in relay.forward(_pieces(raw, size))])


def test_added_fields_come_out_of_every_event_however_the_bytes_are_split() -> None:
    raw = b"".join(_event(chunk) for chunk in TOOL_STREAM) + b"data: [DONE]\n\n"
    for size in (1, 7, len(raw)):
        relay = StreamRelay("chat", {"return_token_ids"})
        sent = asyncio.run(_relayed(relay, raw, size))
        assert b"token_ids" not in sent and sent.endswith(b"data: [DONE]\n\n")
        expected = [{k: v for k, v in c.items() if k != "prompt_token_ids"} for c in TOOL_STREAM]
        for chunk in expected:
            chunk["choices"] = [
                {k: v for k, v in choice.items() if k != "token_ids"} for choice in chunk["choices"]
            ]
        assert sent == b"".join(_event(c) for c in expected) + b"data: [DONE]\n\n"
        assert relay.assembler.done
        assert relay.assembler.response()["choices"][0]["token_ids"] == [7, 8, 9, 10, 11]
        # nothing added: the backend's bytes, in the pieces they came in, even when the
        # last event lacks its blank line
        for sent_raw in (raw, raw.removesuffix(b"\n\n")):
            untouched = StreamRelay("chat", set())
            assert asyncio.run(_relayed(untouched, sent_raw, size)) == sent_raw
            assert untouched.assembler.done
