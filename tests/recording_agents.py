"""An agent wrapper for fidelity audits, shared by the tests and bench/ scripts."""

from __future__ import annotations

from typing import Any

from agentsgym import AgentAction
from agentsgym.agents import acall_agent


class RecordingAgent:
    """Forwards to an agent (the openai one) and keeps the prompt ids the server reported
    for every turn, by ``(session_id, step)``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.wants_prompt_token_ids = inner.wants_prompt_token_ids
        self.reported: dict[tuple[str, int], list[int] | None] = {}

    async def get_action(
        self, messages: Any, agent_state: Any, *, context: Any, prompt_token_ids: Any = None
    ) -> tuple[AgentAction, Any]:
        action, _ = await acall_agent(self.inner, messages, None, prompt_token_ids)
        self.reported[(context.session_id, context.step)] = action.prompt_token_ids
        return action, agent_state
