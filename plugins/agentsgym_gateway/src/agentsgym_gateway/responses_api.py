"""OpenAI's Responses API (what the OpenAI Agents SDK calls by default), over chat.

A ``POST /v1/responses`` becomes one chat completion of the backend (recorded like
any other call, ``endpoint="responses"``): ``instructions`` and ``input`` items
become messages, function tools become chat tools, and the chat answer becomes a
Response with a ``message`` item and one ``function_call`` item per tool call.
A streaming request gets the answer as the Responses API's events
(:func:`agentsgym_gateway.streaming.response_events`); server-side state
(``previous_response_id``) is refused with a message that says so (:data:`UNSUPPORTED`).
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

UNSUPPORTED = {
    "previous_response_id": "the gateway keeps no server-side conversation state: send the "
    "whole input instead of previous_response_id",
}
PASSED_ON = ("temperature", "top_p", "tool_choice", "parallel_tool_calls", "seed", "user")


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = [p.get("text", "") for p in content or [] if isinstance(p, dict)]
    return "".join(parts)


def to_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The chat messages of a Responses request."""
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": body["instructions"]})
    items = body.get("input")
    if isinstance(items, str):
        return [*messages, {"role": "user", "content": items}]
    for item in items or []:
        kind = item.get("type", "message")
        if kind == "message":
            role = "system" if item.get("role") == "developer" else item.get("role", "user")
            messages.append({"role": role, "content": _text_of(item.get("content"))})
        elif kind == "function_call":
            call = {
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments", "")},
            }
            last = messages[-1] if messages else None
            if last and last["role"] == "assistant" and "tool_calls" in last:
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else _text_of(output)
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": text})
        # reasoning items and others carry nothing a chat template renders
    return messages


def to_chat_body(body: dict[str, Any]) -> dict[str, Any]:
    chat: dict[str, Any] = {"model": body.get("model"), "messages": to_messages(body)}
    # "stream" stays out: the gateway asks the backend for a complete answer
    tools = [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t.get("description") or "",
                "parameters": t.get("parameters") or {"type": "object", "properties": {}},
            },
        }
        for t in body.get("tools") or []
        if t.get("type") == "function"
    ]
    if tools:
        chat["tools"] = tools
    if body.get("max_output_tokens"):
        chat["max_tokens"] = body["max_output_tokens"]
    for name in PASSED_ON:
        if body.get(name) is not None:
            chat[name] = body[name]
    if isinstance(chat.get("tool_choice"), dict) and chat["tool_choice"].get("name"):
        chat["tool_choice"] = {
            "type": "function",
            "function": {"name": chat["tool_choice"]["name"]},
        }
    return chat


def to_response(body: dict[str, Any], chat: dict[str, Any]) -> dict[str, Any]:
    """The Responses object of a chat completion."""
    choice = (chat.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    output: list[dict[str, Any]] = []
    if message.get("content"):
        output.append(
            {
                "type": "message",
                "id": f"msg_{secrets.token_hex(12)}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": message["content"], "annotations": []}],
            }
        )
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments = function.get("arguments")
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{secrets.token_hex(12)}",
                "call_id": call.get("id"),
                "name": function.get("name"),
                "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                "status": "completed",
            }
        )
    usage = chat.get("usage") or {}
    length = choice.get("finish_reason") == "length"
    return {
        "id": f"resp_{secrets.token_hex(12)}",
        "object": "response",
        "created_at": chat.get("created") or int(time.time()),
        "status": "incomplete" if length else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if length else None,
        "error": None,
        "model": chat.get("model") or body.get("model"),
        "instructions": body.get("instructions"),
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "temperature": body.get("temperature"),
        "top_p": body.get("top_p"),
        "max_output_tokens": body.get("max_output_tokens"),
        "previous_response_id": None,
        "metadata": body.get("metadata") or {},
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "usage": {
            "input_tokens": usage.get("prompt_tokens", 0),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage.get("completion_tokens", 0),
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.get("total_tokens", 0),
        },
    }
