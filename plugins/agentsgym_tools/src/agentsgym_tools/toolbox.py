"""Toolbox: what the engine asks of an episode's tools (``MultistepEnv.episode_tools``).

``schemas`` go to the chat template's ``tools=`` (and to a chat server's ``tools``);
``respond(action)`` reads the reply's calls and answers them, or returns ``None`` for a
reply without calls, which the env's ``step_episode`` then takes as usual. ``context``
is the episode's :class:`~agentsgym_tools.ToolContext`, given to the tools that ask.

A chat template that renders one call per reply (Llama-3.x raises ``This model only
supports single tool-calls at once!``) cannot write a reply of several: such a reply is
answered with an error that tells the model to call one tool at a time, as a reply
whose calls cannot be read is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentsgym import TOOL_ERROR_PREFIX, AgentAction, Message, Messages
from agentsgym_tools.context import ToolContext
from agentsgym_tools.parsing import ParsedReply, ToolCallParser
from agentsgym_tools.runner import ToolRunner
from agentsgym_tools.tool import Tool

__all__ = ["Toolbox"]


class Toolbox:
    """The tools of one episode, their parser and their runner (one per episode)."""

    def __init__(
        self,
        tools: Sequence[Tool],
        parser: ToolCallParser,
        runner: ToolRunner,
        *,
        context: ToolContext | None = None,
        one_call_per_reply: bool = False,
    ) -> None:
        self.tools = list(tools)
        self.schemas = [t.schema for t in self.tools]
        self.parser = parser
        self.runner = runner
        self.context = context if context is not None else ToolContext(task_data={})
        self.one_call_per_reply = one_call_per_reply
        self.calls_seen = 0

    async def respond(self, action: AgentAction, **episode: Any) -> tuple[Message, Messages] | None:
        """(the reply as an assistant message with its calls, the tool messages answering
        them), or ``None`` when the reply calls no tool. An engine may pass the episode's
        current ``state=`` and its ``session_id=``: the tools' context then follows them."""
        if "state" in episode:
            self.context.state = episode["state"]
        if "session_id" in episode:
            self.context.session_id = episode["session_id"]
        parsed = self.parser.parse(action, self.schemas)
        if parsed.error is None and self.one_call_per_reply and len(parsed.calls) > 1:
            parsed.error = (
                f"this model's chat template allows one tool call per reply, and this reply "
                f"made {len(parsed.calls)}; none was run. Call one tool, read its result, then "
                "call the next"
            )
        if parsed.error is not None:  # a call was attempted but cannot be read: say so
            reply = Message(role="assistant", content=action.text)
            return reply, [Message(role="user", content=TOOL_ERROR_PREFIX + parsed.error)]
        if not parsed.calls:
            return None
        # Calls written as text have no ids: number them across the episode's replies.
        first, self.calls_seen = self.calls_seen, self.calls_seen + len(parsed.calls)
        calls = [
            {**call, "id": call.get("id") or f"call_{first + i}"}
            for i, call in enumerate(parsed.calls)
        ]
        return _assistant(parsed, calls), await self.runner.run(calls, self.context)


def _assistant(parsed: ParsedReply, calls: list[dict[str, Any]]) -> Message:
    message = Message(role="assistant", content=parsed.content, tool_calls=calls)
    if parsed.reasoning:
        message["reasoning_content"] = parsed.reasoning  # type: ignore[typeddict-unknown-key]
    return message
