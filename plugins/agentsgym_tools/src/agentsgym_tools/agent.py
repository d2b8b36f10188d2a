"""ScriptedToolAgent: calls tools as a model does, for tests and examples.

Each turn of its script is either text (a final answer) or a list of calls
``[(name, arguments), ...]``. Calls are written the way the tokenizer's own chat
template writes them (``<tool_call>`` blocks for Qwen, a JSON object for Llama-3), so
the reply reads back to the same calls and re-renders to the same text. A callable
script decides each turn from the conversation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentsgym import AgentAction, load_tokenizer
from agentsgym.tokenization import ChatTokenizer, reply_as_rendered
from agentsgym.types import Message, Messages

__all__ = ["ScriptedToolAgent", "ToolCalls", "Turn"]

ToolCalls = list[tuple[str, dict[str, Any]]]
Turn = str | ToolCalls
_BASE = [Message(role="user", content="Use the tools.")]


class ScriptedToolAgent:
    """Plays ``script`` (turn ``n`` of an episode is ``script[n]``, the last repeating), or
    ``script(messages) -> Turn``. ``token_out=True`` returns the reply's token ids too, as
    a model server's sampled ids (text-only otherwise). ``tokenizer=None``: the bundled one.
    """

    run_inline = True

    def __init__(
        self,
        script: Sequence[Turn] | Callable[[Messages], Turn],
        tokenizer: Any = "agentsgym/tiny-chatml",
        *,
        token_out: bool = False,
    ) -> None:
        self.script = script
        self.tokenizer = load_tokenizer(tokenizer)
        self.chat = ChatTokenizer(self.tokenizer)
        self.token_out = token_out

    def get_action(self, messages: Messages, agent_state: Any, **_: Any) -> tuple[Any, Any]:
        turn = self._turn(messages)
        text = turn if isinstance(turn, str) else self.write_calls(turn)
        if not self.token_out:
            return text, agent_state
        ids = self.chat.encode_model_text(text) + list(self.chat.eot_ids)
        return AgentAction(text=text, token_ids=ids), agent_state

    def write_calls(self, calls: ToolCalls) -> str:
        """The text a model of this chat template writes for ``calls``."""
        reply = Message(role="assistant", content="", tool_calls=[
            {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
            for i, (n, a) in enumerate(calls)
        ])  # fmt: skip
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
