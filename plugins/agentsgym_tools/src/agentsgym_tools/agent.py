"""ScriptedToolAgent: calls tools as a model does, for tests and examples.

Each turn of its script is either text (a final answer) or a list of calls
``[(name, arguments), ...]``. Calls are returned structured, as a chat server returns
them, or, given a tokenizer, written the way its chat template writes them
(``<tool_call>`` blocks for Qwen, a JSON object for Llama-3), so that the reply reads
back to the same calls and re-renders to the same text. A callable script decides each
turn from the conversation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from agentsgym import AgentAction, Message, Messages, load_tokenizer
from agentsgym.runtime import ChatTokenizer, reply_as_rendered

__all__ = ["ScriptedToolAgent", "ToolCalls", "Turn"]

ToolCalls = list[tuple[str, dict[str, Any]]]
Turn = str | ToolCalls
_BASE = [Message(role="user", content="Use the tools.")]


class ScriptedToolAgent:
    """Plays ``script`` (turn ``n`` of an episode is ``script[n]``, the last repeating), or
    ``script(messages) -> Turn``.

    Without a ``tokenizer`` it returns calls structured, as a chat server with a tool
    parser does (``AgentAction.tool_calls``), and the runner writes them into the stream
    as the env's own chat template does: it plays any env on any tokenizer. With one, it
    writes the calls as text the way that tokenizer's template does, as a model would;
    ``token_out=True`` (which needs the tokenizer) returns their token ids too, as a
    model server's sampled ids. Give it the env's tokenizer then.
    """

    run_inline = True

    def __init__(
        self,
        script: Sequence[Turn] | Callable[[Messages], Turn],
        tokenizer: Any = None,
        *,
        token_out: bool = False,
    ) -> None:
        if token_out and tokenizer is None:
            raise ValueError("token_out=True needs the tokenizer whose template writes the calls")
        self.script = script
        self.tokenizer = None if tokenizer is None else load_tokenizer(tokenizer)
        self.chat = None if self.tokenizer is None else ChatTokenizer(self.tokenizer)
        self.token_out = token_out

    def get_action(self, messages: Messages, agent_state: Any, **_: Any) -> tuple[Any, Any]:
        turn = self._turn(messages)
        if self.chat is None:
            return (turn if isinstance(turn, str) else _structured(turn)), agent_state
        text = turn if isinstance(turn, str) else self.write_calls(turn)
        if not self.token_out:
            return text, agent_state
        ids = self.chat.encode_model_text(text) + list(self.chat.eot_ids)
        return AgentAction(text=text, token_ids=ids), agent_state

    def write_calls(self, calls: ToolCalls) -> str:
        """The text a model of this chat template writes for ``calls``."""
        if self.chat is None:
            raise ValueError(
                "writing calls as text needs a tokenizer (ScriptedToolAgent(..., tokenizer))"
            )
        reply = Message(
            role="assistant",
            content="",
            tool_calls=[
                {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
                for i, (n, a) in enumerate(calls)
            ],
        )
        answers = [
            Message(role="tool", tool_call_id=f"call_{i}", name=n, content="")
            for i, (n, _) in enumerate(calls)
        ]
        text = reply_as_rendered(self.chat, _BASE, reply, answers)
        if text is None:
            raise ValueError(
                f"the chat template of {getattr(self.tokenizer, 'name_or_path', '?')!r} does "
                "not render tool calls where they can be told apart"
            )
        return text

    def _turn(self, messages: Messages) -> Turn:
        if callable(self.script):
            return self.script(messages)
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        return self.script[min(turn, len(self.script) - 1)]


def _structured(calls: ToolCalls) -> AgentAction:
    """``calls`` as a chat server returns them: OpenAI's form, arguments as JSON text."""
    return AgentAction(
        text="",
        tool_calls=[
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for i, (name, arguments) in enumerate(calls)
        ],
    )
