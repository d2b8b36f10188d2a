"""What the gateway asks the backend for, and what it hands back to the program.

The gateway asks every backend call for the ids it needs (vLLM's
``return_token_ids: true``, ``logprobs``). What the program receives is the backend's
answer as the program asked for it:

* when the program asked for everything the gateway added, the backend's bytes,
  untouched;
* otherwise the backend's JSON with exactly the added fields taken out, written as
  the backend wrote it (compact JSON, keys in the backend's order): for the loopback
  server and any server writing compact JSON as Python's ``json`` or orjson do,
  the bytes it would have sent (:func:`agentsgym_gateway.jsonio.rewrite`);
* a program that asked to stream gets the backend's own stream, each event treated
  the same way (:mod:`agentsgym_gateway.relay`), or, where the gateway rewrites the
  answer (a tool parser) or cannot stream from the backend, the complete answer as
  Server-Sent Events (:mod:`agentsgym_gateway.streaming`).

A request for ``n`` choices gets one record per choice (:func:`record_of`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentsgym.runtime import policy_version_of
from agentsgym_gateway.records import CallRecord

COMPLETION_LOGPROBS = 1
"""A completions request's ``logprobs`` is a count of alternatives: 1 returns the
sampled token's logprob with one alternative, the least that carries it."""


@dataclass
class BackendRequest:
    """The body sent to the backend, and which of its fields the gateway added."""

    body: dict[str, Any]
    added: set[str] = field(default_factory=set)
    stream: bool = False
    include_usage: bool = False


def prepare(
    kind: str, body: dict[str, Any], *, token_ids: bool = True, stream_backend: bool = False
) -> BackendRequest:
    """The backend request for a program's ``chat`` or ``completions`` request
    (``token_ids=False``: for a backend that refuses ``return_token_ids``;
    ``stream_backend``: a streaming request is sent on as one, ``stream_options`` too)."""
    sent = dict(body)
    stream = bool(sent.get("stream", False))
    options = sent.get("stream_options")
    include_usage = bool(isinstance(options, dict) and options.get("include_usage"))
    if not (stream and stream_backend):
        sent.pop("stream", None)
        sent.pop("stream_options", None)
    added: set[str] = set()
    if token_ids and not sent.get("return_token_ids"):
        sent["return_token_ids"] = True
        added.add("return_token_ids")
    if not sent.get("logprobs"):
        sent["logprobs"] = True if kind == "chat" else COMPLETION_LOGPROBS
        added.add("logprobs")
    return BackendRequest(sent, added, stream, include_usage)


def program_view(kind: str, response: dict[str, Any], added: set[str]) -> dict[str, Any]:
    """The backend's answer without the fields that only the gateway asked for."""
    view = dict(response)
    choices = [dict(c) for c in view.get("choices") or []]
    if "return_token_ids" in added:
        view.pop("prompt_token_ids", None)
        for choice in choices:
            choice.pop("token_ids", None)
            choice.pop("prompt_token_ids", None)
    if "logprobs" in added:
        for choice in choices:
            if "logprobs" in choice:
                choice["logprobs"] = None
    if "choices" in view:
        view["choices"] = choices
    return view


def requested_choices(body: dict[str, Any]) -> int:
    """How many choices a request asks for (its ``n``; 1 when absent)."""
    n = body.get("n")
    return n if isinstance(n, int) and n > 1 else 1


def record_of(
    kind: str, request: dict[str, Any], response: dict[str, Any], position: int = 0
) -> CallRecord:
    """The call record of one choice (the ``position``-th) of a successful answer, with
    ids where the backend gave them, and the version of the weights that answered where
    the backend said (its top-level ``policy_version``)."""
    choice = (response.get("choices") or [{}])[position]
    record = CallRecord(index=-1, endpoint="chat" if kind == "chat" else "completions")
    record.tools = request.get("tools")
    record.policy_version = policy_version_of(response)
    record.finish_reason = choice.get("finish_reason")
    record.completion_token_ids = token_ids(choice.get("token_ids"))
    if kind == "chat":
        record.messages = list(request.get("messages") or [])
        message = choice.get("message") or {}
        record.text = message.get("content") or ""
        record.tool_calls = message.get("tool_calls") or None
        record.prompt_token_ids = token_ids(response.get("prompt_token_ids"))
        content = (choice.get("logprobs") or {}).get("content")
        record.logprobs = [float(t["logprob"]) for t in content] if content else None
    else:
        record.prompt = request.get("prompt")
        record.text = choice.get("text") or ""
        record.prompt_token_ids = token_ids(choice.get("prompt_token_ids"))
        values = (choice.get("logprobs") or {}).get("token_logprobs")
        record.logprobs = [float(v) for v in values] if values else None
    ids = record.completion_token_ids
    if record.logprobs is not None and (ids is None or len(ids) != len(record.logprobs)):
        record.logprobs = None  # logprobs that do not pair with the ids describe nothing
    return record


def token_ids(values: Any) -> list[int] | None:
    """A backend's list of token ids, as ints (None when it sent no list).

    A list parsed from JSON is kept as it is when it holds only ints, which one ``sum``
    tells (a float makes the sum a float; a string, null, list or object stops it), a
    tenth of the time of rebuilding it (16,000 ids: 0.13 ms against 0.84 ms); anything
    else is converted id by id, as ``int()`` reads it."""
    if not isinstance(values, list):
        return None
    try:
        if isinstance(sum(values), int):
            return values
    except TypeError:
        pass
    return [int(v) for v in values]
