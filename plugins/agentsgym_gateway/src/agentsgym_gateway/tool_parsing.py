"""Tool calls read out of a reply's text, as vLLM's ``--tool-call-parser hermes`` does.

A backend that answers with text only (agentsgym-serve's loopback server, llama.cpp
without ``--jinja``) leaves ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
in the content. With ``tool_parser="hermes"`` the gateway turns those into OpenAI
``tool_calls`` as vLLM would, so a program's tool loop runs. The recorded ids are the
backend's, unchanged: parsing changes what the program reads, never the tokens.
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Any

TOOL_PARSERS = ("hermes",)
_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def parse_hermes(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """``(content before the first call or None, calls)``; no calls if any is not JSON."""
    calls = []
    for match in _HERMES.finditer(text):
        try:
            parsed = json.loads(match.group(1))
        except ValueError:
            return text, []
        if not isinstance(parsed, dict) or not isinstance(parsed.get("name"), str):
            return text, []
        arguments = parsed.get("arguments", {})
        calls.append(
            {
                "id": f"chatcmpl-tool-{secrets.token_hex(8)}",
                "type": "function",
                "function": {
                    "name": parsed["name"],
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
        )
    if not calls:
        return text, []
    before = text[: text.index("<tool_call>")].strip()
    return before or None, calls


def with_parsed_calls(response: dict[str, Any]) -> bool:
    """Rewrite the first choice's text calls as ``tool_calls``, in place; whether it did."""
    choices = response.get("choices") or []
    if not choices:
        return False
    message = choices[0].get("message") or {}
    if message.get("tool_calls") or not isinstance(message.get("content"), str):
        return False
    content, calls = parse_hermes(message["content"])
    if not calls:
        return False
    choices[0]["message"] = {**message, "content": content, "tool_calls": calls}
    if choices[0].get("finish_reason") == "stop":
        choices[0]["finish_reason"] = "tool_calls"
    return True
