"""The Agent protocol and the normalisation of what agents return."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from agentsgym.errors import AgentError
from agentsgym.types import AgentAction, Messages


@runtime_checkable
class Agent(Protocol):
    """Anything that replies to a conversation.

    ``get_action(messages, agent_state)`` returns ``(reply, agent_state)`` where
    ``reply`` is the text, or an :class:`AgentAction` carrying the sampled token ids
    and logprobs too. ``agent_state`` is the agent's own memory: ``None`` at the
    start of a trial, then whatever the agent returned last; it is kept across the
    episodes of one trial.

    Token-in agents set ``wants_prompt_token_ids = True`` and are then called with
    ``prompt_token_ids=`` the exact ids of the episode so far, to generate from, or
    ``None`` when there are none (an env without a tokenizer, or an env asking an
    agent something itself, like a game master): the agent then renders the
    messages itself, or raises :class:`~agentsgym.errors.AgentError`.
    """

    def get_action(self, messages: Messages, agent_state: Any) -> tuple[str | AgentAction, Any]: ...


def call_agent(
    agent: Agent, messages: Messages, agent_state: Any, prompt_token_ids: list[int] | None
) -> tuple[AgentAction, Any]:
    """Call an agent and check what it returned."""
    if getattr(agent, "wants_prompt_token_ids", False):
        result = agent.get_action(list(messages), agent_state, prompt_token_ids=prompt_token_ids)  # type: ignore[call-arg]
    else:
        result = agent.get_action(list(messages), agent_state)
    if not (isinstance(result, tuple) and len(result) == 2):
        raise AgentError(
            f"{type(agent).__name__}.get_action must return (reply, agent_state), got "
            f"{type(result).__name__}: {result!r:.200}"
        )
    reply, new_state = result
    if isinstance(reply, str):
        return AgentAction(text=reply), new_state
    if isinstance(reply, AgentAction):
        return reply, new_state
    raise AgentError(
        f"{type(agent).__name__}.get_action returned a reply of type "
        f"{type(reply).__name__}; expected str or agentsgym.AgentAction"
    )
