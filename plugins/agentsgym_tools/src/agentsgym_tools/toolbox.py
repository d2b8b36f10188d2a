"""Toolbox: what the engine asks of an episode's tools (``MultistepEnv.episode_tools``).

``schemas`` go to the chat template's ``tools=`` (and to a chat server's ``tools``);
``respond(action)`` reads the reply's calls and answers them, or returns ``None`` for a
reply without calls, which the env's ``step_episode`` then takes as usual.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentsgym import AgentAction
from agentsgym.types import Message, Messages
from agentsgym_tools.parsing import ParsedReply, ToolCallParser
from agentsgym_tools.runner import ERROR_PREFIX, ToolRunner
from agentsgym_tools.tool import Tool

__all__ = ["Toolbox"]


class Toolbox:
    """The tools of one episode, their parser and their runner (one per episode)."""

    def __init__(self, tools: Sequence[Tool], parser: ToolCallParser, runner: ToolRunner) -> None:
        self.tools = list(tools)
        self.schemas = [t.schema for t in self.tools]
        self.parser = parser
        self.runner = runner
        self.calls_seen = 0

    async def respond(self, action: AgentAction) -> tuple[Message, Messages] | None:
        """(the reply as an assistant message with its calls, the tool messages answering
        them), or ``None`` when the reply calls no tool."""
        parsed = self.parser.parse(action, self.schemas)
        if parsed.error is not None:  # a call was attempted but cannot be read: say so
            reply = Message(role="assistant", content=action.text)
            return reply, [Message(role="user", content=ERROR_PREFIX + parsed.error)]
        if not parsed.calls:
            return None
        # Calls written as text have no ids: number them across the episode's replies.
        first, self.calls_seen = self.calls_seen, self.calls_seen + len(parsed.calls)
        calls = [
            {**call, "id": call.get("id") or f"call_{first + i}"}
            for i, call in enumerate(parsed.calls)
        ]
        return _assistant(parsed, calls), await self.runner.run(calls)


def _assistant(parsed: ParsedReply, calls: list[dict[str, Any]]) -> Message:
    message = Message(role="assistant", content=parsed.content, tool_calls=calls)
    if parsed.reasoning:
        message["reasoning_content"] = parsed.reasoning  # type: ignore[typeddict-unknown-key]
    return message
