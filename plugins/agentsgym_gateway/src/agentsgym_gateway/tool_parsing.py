"""Tool calls read out of a reply's text, as vLLM's ``--tool-call-parser`` does.

A backend that answers with text only (agentsgym-serve's loopback server, llama.cpp
without ``--jinja``) leaves the model's calls in the content, written the way the
model's chat template writes them. The gateway turns those into OpenAI ``tool_calls``
as vLLM's parser of the same name would, so a program's tool loop runs:

* ``hermes``: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks
  (Qwen2.5, Qwen3, Hermes templates); the text before the first block stays content;
* ``llama3_json``: a reply that is one or more JSON objects
  ``{"name": ..., "parameters": {...}}`` separated by ``;``, optionally after
  ``<|python_tag|>`` (the Llama-3.1 / 3.2 templates); the content is then ``None``;
* ``auto``: the parser whose format the chat template writes (:func:`parser_for_template`).

The recorded ids are the backend's, unchanged: parsing changes what the program reads,
never the tokens. A reply that does not parse whole is left as text, as vLLM leaves it.
(transformers' ``parse_response`` needs a ``response_template`` that these packs do not
ship, and reads the template's format rather than the one vLLM serves programs; the
parsers here follow vLLM's, which is what a program fronting vLLM receives.)
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from typing import Any

ParsedReply = tuple[str | None, list[dict[str, Any]]]
"""``(content, calls)``: the content the program reads, and the calls parsed."""

AUTO = "auto"
_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
LLAMA3_PYTHON_TAG = "<|python_tag|>"
_LLAMA3_SEPARATOR = re.compile(r"\s*;?\s*")


def _call(name: str, arguments: Any) -> dict[str, Any]:
    """An OpenAI tool call, with vLLM's id format and JSON-text arguments."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return {
        "id": f"chatcmpl-tool-{secrets.token_hex(8)}",
        "type": "function",
        "function": {"name": name, "arguments": text},
    }


def parse_hermes(text: str) -> ParsedReply:
    """``(content before the first call or None, calls)``; no calls if any is not JSON."""
    calls = []
    for match in _HERMES.finditer(text):
        try:
            parsed = json.loads(match.group(1))
        except ValueError:
            return text, []
        if not isinstance(parsed, dict) or not isinstance(parsed.get("name"), str):
            return text, []
        calls.append(_call(parsed["name"], parsed.get("arguments", {})))
    if not calls:
        return text, []
    before = text[: text.index("<tool_call>")].strip()
    return before or None, calls


def parse_llama3_json(text: str) -> ParsedReply:
    """``(None, calls)`` for a reply made of Llama-3 JSON calls only, else ``(text, [])``.

    Each call is ``{"name": ..., "parameters": {...}}`` (``arguments`` is read too, as
    vLLM's ``llama3_json`` parser reads it); several are separated by ``;``.
    """
    body = text.strip()
    if body.startswith(LLAMA3_PYTHON_TAG):
        body = body[len(LLAMA3_PYTHON_TAG) :].lstrip()
    if not body.startswith("{"):
        return text, []
    decoder = json.JSONDecoder()
    calls, position = [], 0
    while position < len(body):
        try:
            parsed, end = decoder.raw_decode(body, position)
        except ValueError:
            return text, []
        if not isinstance(parsed, dict) or not isinstance(parsed.get("name"), str):
            return text, []
        arguments = parsed["parameters"] if "parameters" in parsed else parsed.get("arguments")
        if arguments is None:
            return text, []
        calls.append(_call(parsed["name"], arguments))
        position = _LLAMA3_SEPARATOR.match(body, end).end()  # type: ignore[union-attr]
    return None, calls


PARSERS: dict[str, Callable[[str], ParsedReply]] = {
    "hermes": parse_hermes,
    "llama3_json": parse_llama3_json,
}
TOOL_PARSERS = (*PARSERS, AUTO)
"""The names a gateway's ``tool_parser`` takes (vLLM's ``--tool-call-parser`` names)."""

_TEMPLATE_MARKS = (
    ("hermes", ("<tool_call>",)),
    ("llama3_json", (LLAMA3_PYTHON_TAG, '"parameters": ')),
)


def parser_for_template(chat_template: str) -> str | None:
    """The parser of the format ``chat_template`` writes tool calls in, or ``None``."""
    for name, marks in _TEMPLATE_MARKS:
        if any(mark in chat_template for mark in marks):
            return name
    return None


def resolve_tool_parser(choice: str | None, chat_template: str | None = None) -> str | None:
    """The parser's name for ``choice``: a parser's name, ``None`` (no parsing), or
    ``"auto"``, resolved by ``chat_template``; an error says what to do otherwise."""
    if choice is None or choice in PARSERS:
        return choice
    if choice != AUTO:
        raise ValueError(
            f"unknown tool_parser {choice!r}; choose one of {', '.join(TOOL_PARSERS)} "
            "or None (the backend parses its own calls)"
        )
    if chat_template is None:
        raise ValueError(
            "tool_parser='auto' picks the parser by the model's chat template: give the "
            f"gateway chat_template=..., or name the parser ({', '.join(PARSERS)})"
        )
    name = parser_for_template(chat_template)
    if name is None:
        raise ValueError(
            "tool_parser='auto': the chat template writes tool calls in no format the "
            f"gateway reads ({', '.join(PARSERS)}); name a parser or leave it None"
        )
    return name


def with_parsed_calls(response: dict[str, Any], parser: str) -> bool:
    """Rewrite each choice's text calls as ``tool_calls``, in place; whether any was."""
    parse = PARSERS[parser]
    rewritten = False
    for choice in response.get("choices") or []:
        message = choice.get("message") or {}
        if message.get("tool_calls") or not isinstance(message.get("content"), str):
            continue
        content, calls = parse(message["content"])
        if not calls:
            continue
        choice["message"] = {**message, "content": content, "tool_calls": calls}
        if choice.get("finish_reason") == "stop":
            choice["finish_reason"] = "tool_calls"
        rewritten = True
    return rewritten
