"""Scripted agents: fixed replies or a plain function, for tests, demos and baselines."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentsgym.types import AgentAction, Messages

Policy = Callable[[Messages, Any], "tuple[str | AgentAction, Any]"]


class ScriptedAgent:
    """Replies with ``replies`` in order within each episode (the n-th reply of an
    episode is ``replies[n]``), repeating the last one."""

    run_inline = True  # instant: the runner calls it on its loop, no thread hop

    def __init__(self, replies: Sequence[str] | str = ("I don't know.",)) -> None:
        if isinstance(replies, str):
            replies = [replies]
        if not replies:
            raise ValueError("ScriptedAgent needs at least one reply")
        self.replies = list(replies)

    def get_action(self, messages: Messages, agent_state: Any) -> tuple[str, Any]:
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        return self.replies[min(turn, len(self.replies) - 1)], agent_state


class FunctionAgent:
    """Wraps ``policy(messages, agent_state) -> (reply, agent_state)`` as an agent."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def get_action(self, messages: Messages, agent_state: Any) -> tuple[str | AgentAction, Any]:
        return self.policy(messages, agent_state)
