"""A streaming backend's answer, forwarded to the program as it comes and recorded.

The program that asked to stream gets the backend's Server-Sent Events as they arrive:
its bytes untouched when the program asked for everything the gateway added
(``return_token_ids``, ``logprobs``), otherwise each event with exactly those fields
taken out (:func:`agentsgym_gateway.wire.program_view`), written as the backend writes
JSON. Meanwhile :class:`StreamAssembler` puts the chunks back together into the
complete answer, from which the call's records are made as for any call: vLLM's
``prompt_token_ids`` (in the first chunk) and each chunk's ``token_ids`` and logprobs
become the record's ids; a stream without ids gives a ``retokenized`` record. Each
chunk's ``policy_version`` (agentsgym's loopback server writes it on every chunk) is the
version of the ids it carries: a stream whose chunks came from different weights gives
its record a version per token.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from agentsgym.runtime import policy_version_of
from agentsgym_gateway.jsonio import loads, rewrite, written_by_orjson
from agentsgym_gateway.wire import program_view, token_ids

_EVENT_END = re.compile(rb"\r?\n\r?\n")
DONE = b"[DONE]"


def _data_of(event: bytes) -> bytes | None:
    """The data of one SSE event (its ``data:`` lines joined), or None if it has none."""
    lines = [line for line in event.splitlines() if line.startswith(b"data:")]
    if not lines:
        return None
    return b"\n".join(line[5:].removeprefix(b" ") for line in lines)


def split_events(buffer: bytearray) -> Iterator[bytes]:
    """The complete events at the head of ``buffer`` (with their blank line), removed
    from it; what follows the last complete event stays."""
    while True:
        end = _EVENT_END.search(buffer)
        if end is None:
            return
        event = bytes(buffer[: end.end()])
        del buffer[: end.end()]
        yield event


@dataclass
class _Choice:
    text: list[str] = field(default_factory=list)
    token_ids: list[int] | None = None
    token_versions: list[int | None] = field(default_factory=list)
    prompt_token_ids: list[int] | None = None
    logprobs: list[float] = field(default_factory=list)
    tool_calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    finish_reason: str | None = None
    role: str = "assistant"


class StreamAssembler:
    """The chunks of a chat or completions stream, put back together (see module doc)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.head: dict[str, Any] = {}
        self.prompt_token_ids: list[int] | None = None
        self.usage: Any = None
        self.choices: dict[int, _Choice] = {}
        self.versions: set[int] = set()
        """The ``policy_version`` of every chunk that had one."""
        self.done = False
        self.error: str | None = None
        """An error event the backend sent in its stream (vLLM's ``{"error": ...}``)."""

    def feed(self, chunk: dict[str, Any]) -> None:
        if chunk.get("error") and not chunk.get("choices"):
            self.error = json.dumps(chunk["error"])
            return
        for key in ("id", "created", "model"):
            self.head.setdefault(key, chunk.get(key))
        if isinstance(chunk.get("prompt_token_ids"), list):
            self.prompt_token_ids = token_ids(chunk["prompt_token_ids"])
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        version = policy_version_of(chunk)
        if version is not None:
            self.versions.add(version)
        for part in chunk.get("choices") or []:
            choice = self.choices.setdefault(int(part.get("index", 0)), _Choice())
            self._feed_choice(choice, part, version)

    def _feed_choice(self, choice: _Choice, part: dict[str, Any], version: int | None) -> None:
        if isinstance(part.get("token_ids"), list):
            ids = token_ids(part["token_ids"]) or []
            choice.token_ids = (choice.token_ids or []) + ids
            choice.token_versions += [version] * len(ids)
        if isinstance(part.get("prompt_token_ids"), list):
            choice.prompt_token_ids = token_ids(part["prompt_token_ids"])
        if part.get("finish_reason"):
            choice.finish_reason = part["finish_reason"]
        logprobs = part.get("logprobs") or {}
        if self.kind == "chat":
            delta = part.get("delta") or {}
            choice.role = delta.get("role") or choice.role
            if isinstance(delta.get("content"), str):
                choice.text.append(delta["content"])
            for call in delta.get("tool_calls") or []:
                self._feed_call(choice, call)
            choice.logprobs.extend(float(t["logprob"]) for t in logprobs.get("content") or [])
        else:
            if isinstance(part.get("text"), str):
                choice.text.append(part["text"])
            values = logprobs.get("token_logprobs") or []
            choice.logprobs.extend(float(v) for v in values)

    @staticmethod
    def _feed_call(choice: _Choice, delta: dict[str, Any]) -> None:
        call = choice.tool_calls.setdefault(
            int(delta.get("index", 0)),
            {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
        )
        call["id"] = delta.get("id") or call["id"]
        function = delta.get("function") or {}
        call["function"]["name"] += function.get("name") or ""
        call["function"]["arguments"] += function.get("arguments") or ""

    def response(self) -> dict[str, Any]:
        """The complete answer the chunks make, as a non-streamed one would be written."""
        choices = [self._choice(index, self.choices[index]) for index in sorted(self.choices)]
        response = {**self.head, "choices": choices, "usage": self.usage}
        if self.prompt_token_ids is not None:
            response["prompt_token_ids"] = self.prompt_token_ids
        if self.versions:  # the oldest: what a staleness bound must look at
            response["policy_version"] = min(self.versions)
        return response

    def token_versions(self, index: int = 0) -> list[int] | None:
        """The version of each sampled id of choice ``index`` when its chunks came from
        different weights (``None``: one version, or some chunk did not say)."""
        choice = self.choices.get(index)
        if choice is None or len(set(choice.token_versions)) < 2:
            return None
        versions = choice.token_versions
        if any(v is None for v in versions) or len(versions) != len(choice.token_ids or []):
            return None
        return [int(v) for v in versions if v is not None]

    def _choice(self, index: int, choice: _Choice) -> dict[str, Any]:
        text = "".join(choice.text)
        paired = choice.token_ids is not None and len(choice.logprobs) == len(choice.token_ids)
        out: dict[str, Any] = {"index": index, "finish_reason": choice.finish_reason}
        if self.kind == "chat":
            calls = [choice.tool_calls[i] for i in sorted(choice.tool_calls)]
            out["message"] = {"role": choice.role, "content": text, "tool_calls": calls or None}
            content = [{"logprob": v} for v in choice.logprobs]
            out["logprobs"] = {"content": content} if paired else None
        else:
            out["text"] = text
            out["logprobs"] = {"token_logprobs": choice.logprobs} if paired else None
            out["prompt_token_ids"] = choice.prompt_token_ids
        out["token_ids"] = choice.token_ids
        return out


class StreamRelay:
    """Forwards a backend's SSE bytes to the program and feeds the assembler."""

    def __init__(self, kind: str, added: set[str]) -> None:
        self.added = added
        self.assembler = StreamAssembler(kind)
        self._buffer = bytearray()

    async def forward(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """The bytes to send the program, chunk by chunk as the backend's arrive."""
        async for chunk in chunks:
            self._buffer.extend(chunk)
            events = list(split_events(self._buffer))
            for event in events:
                self._record(event)
            if not self.added:
                yield chunk  # the backend's bytes, as they came
            elif events:
                yield b"".join(self._program_event(event) for event in events)
        if self._buffer:  # a last event without its blank line (already sent if raw)
            tail = bytes(self._buffer)
            self._buffer.clear()
            self._record(tail)
            if self.added:
                yield self._program_event(tail)

    def _record(self, event: bytes) -> None:
        data = _data_of(event)
        if data is None:
            return
        if data.strip() == DONE:
            self.assembler.done = True
            return
        try:
            chunk = loads(data)
        except ValueError:
            return
        if isinstance(chunk, dict):
            self.assembler.feed(chunk)

    def _program_event(self, event: bytes) -> bytes:
        """One event with the fields only the gateway asked for taken out."""
        lines = [line for line in event.splitlines() if line.strip()]
        data = _data_of(event)
        if data is None or len(lines) != 1 or data.strip() == DONE:
            return event
        try:
            chunk = loads(data)
        except ValueError:
            return event
        if not isinstance(chunk, dict):
            return event
        view = program_view(self.assembler.kind, chunk, self.added)
        written = rewrite(view, written_by_orjson(data, chunk))
        return b"data: " + written + event[event.index(lines[0]) + len(lines[0]) :]
