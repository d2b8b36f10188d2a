"""Tool calls out of a reply, by the library that knows the model's format.

* A chat server that parsed the calls (vLLM's ``tool_calls``) is taken at its word.
* Otherwise transformers' response parsing reads the reply, with the tokenizer's own
  ``response_template``, else the one TRL keeps for its chat template
  (``trl.chat_template_utils.add_response_schema``: Qwen2.5/3, Llama-3.x, ...), else the
  Hermes ``<tool_call>{json}</tool_call>`` format of ChatML templates (the bundled tiny
  tokenizer's, Qwen3's), which is :data:`HERMES_TEMPLATE`, TRL's Qwen3 template.
"""

from __future__ import annotations

import copy
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentsgym import AgentAction

__all__ = ["HERMES_TEMPLATE", "ParsedReply", "ToolCallParser", "response_template_of"]

logger = logging.getLogger(__name__)

HERMES_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "reasoning_content": {
            "open": "<think>",
            "close_pattern": r"</think>\s*",
            "content": "text",
        },
        "tool_calls": {
            "open": "<tool_call>",
            "close_pattern": r"</tool_call>\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"<\|im_end\|>\s*", "content": "text"},
    },
}
"""Hermes-style tool calls in ChatML, as TRL's ``qwen3_template`` reads them."""


@dataclass
class ParsedReply:
    """A reply read for tool calls: its text content, its calls in OpenAI's form (with
    ``arguments`` a dict), and a parse error the model should be told about."""

    content: str
    calls: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    reasoning: str = ""


def response_template_of(tokenizer: Any) -> dict[str, Any]:
    """The response template that reads this tokenizer's replies (see the module doc)."""
    own = getattr(tokenizer, "response_template", None) if tokenizer is not None else None
    if isinstance(own, dict):
        return own
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        try:
            from trl.chat_template_utils import add_response_schema

            probe = copy.copy(tokenizer)  # add_response_schema sets an attribute on it
            add_response_schema(probe)
            known = getattr(probe, "response_template", None)
            if isinstance(known, dict):
                return known
        except (ImportError, ValueError):  # no TRL, or a template TRL does not know
            logger.debug("TRL has no response template for this chat template", exc_info=True)
    return HERMES_TEMPLATE


class ToolCallParser:
    """Reads the tool calls of replies for one tokenizer (``None``: the Hermes format)."""

    def __init__(self, tokenizer: Any = None, *, eot_text: str = "") -> None:
        self.template = response_template_of(tokenizer)
        self.eot_text = eot_text or ("<|im_end|>" if self.template is HERMES_TEMPLATE else "")
        close = str(self.template.get("fields", {}).get("tool_calls", {}).get("close_pattern", ""))
        # Llama-3's calls close at `}<|eot_id|>`: only such templates need the end to read one
        self.calls_close_at_end = bool(self.eot_text) and re.escape(self.eot_text) in close

    def parse(self, action: AgentAction, tools: Sequence[dict[str, Any]] = ()) -> ParsedReply:
        if action.tool_calls:  # the server parsed them
            return _read_calls(action.text, action.tool_calls)
        from transformers.utils.chat_parsing import parse_response

        # Some templates close a call only at the end of the turn (Llama-3's `}<|eot_id|>`):
        # a reply that ended, whose text lacks the end a server strips, is read with it. A
        # reply cut at the length limit never ended: it is read as written. An error never
        # quotes the added end: the model did not write it.
        added = ""
        if self.calls_close_at_end and not action.truncated:
            added = "" if action.text.endswith(self.eot_text) else self.eot_text
        try:
            parsed = parse_response(
                action.text + added, self.template, prefix="", tools=list(tools) or None
            )
        except Exception as exc:  # noqa: BLE001 - a malformed call is the model's to fix
            reason = str(exc).replace(added, "") if added else str(exc)
            return ParsedReply(action.text, error=f"your tool call could not be parsed: {reason}")
        calls = parsed.get("tool_calls") or []
        if not calls:
            return ParsedReply(action.text)
        read = _read_calls(str(parsed.get("content") or "").strip(), calls)
        read.reasoning = str(parsed.get("reasoning_content") or "")
        return read


def _read_calls(content: str, calls: Sequence[Any]) -> ParsedReply:
    """The calls in OpenAI's form, or the error that a call is not a JSON object."""
    for call in calls:
        function = call.get("function", call) if isinstance(call, dict) else call
        if not isinstance(function, dict):
            written = json.dumps(function, default=str)[:80]
            return ParsedReply(
                content,
                error=(
                    "your tool call could not be read: a call is a JSON object "
                    f'{{"name": ..., "arguments": {{...}}}}, not {written}'
                ),
            )
    return ParsedReply(content, [_normalized(c) for c in calls])


def _normalized(call: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's form with ``arguments`` a dict (a string that is not JSON stays a string,
    and the runner answers it with an error)."""
    function = call.get("function") or call
    arguments = function.get("arguments", function.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            pass
    normalized: dict[str, Any] = {
        "type": "function",
        "function": {"name": str(function.get("name", "")), "arguments": arguments},
    }
    if call.get("id"):
        normalized["id"] = str(call["id"])
    return normalized
