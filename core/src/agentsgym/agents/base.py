"""The Agent protocol, and how the runner calls agents (sync or async)."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentsgym.errors import AgentError
from agentsgym.surrogates import repair_text
from agentsgym.types import AgentAction, EpisodeContext, Messages

if TYPE_CHECKING:
    from agentsgym.worker_pool import WorkerPool

REPAIRED_SURROGATES_KEY = "repaired_surrogates"
"""Step info key set when a reply held surrogate code points that were repaired."""


@runtime_checkable
class Agent(Protocol):
    """Anything that replies to a conversation.

    ``get_action(messages, agent_state)`` returns ``(reply, agent_state)`` where
    ``reply`` is the text, or an :class:`AgentAction` carrying the sampled token ids
    and logprobs too. It may be a plain method or ``async def``: the runner awaits
    async agents on its event loop and runs plain ones in a thread pool sized to the
    run's ``max_concurrency`` (set ``run_inline = True`` on an agent whose plain
    ``get_action`` is instant and never blocks, such as a scripted policy, to skip the
    thread hop).

    ``agent_state`` is the agent's own memory: ``None`` at the start of every trial,
    then whatever the agent returned last; it is kept across the episodes of one
    trial (``episodes_per_trial > 1``) and never shared between rollouts.

    Optional keyword arguments, passed only when ``get_action`` declares them:

    * ``context``: an :class:`~agentsgym.types.EpisodeContext` (session id, task,
      rollout and episode indices, a per-rollout seed, the step).
    * ``prompt_token_ids`` (token-in agents, which set ``wants_prompt_token_ids =
      True``): the exact ids of the episode so far, to generate from, or ``None``
      when there are none (an env without a tokenizer, or an env asking an agent
      something itself, like a game master): the agent then renders the messages
      itself, or raises :class:`~agentsgym.errors.AgentError`.

    An agent whose concurrency can be tuned implements
    ``follow_concurrency(max_concurrency)``; the runner calls it with the run's
    setting (the OpenAI agent's request limit follows it unless set explicitly).
    """

    def get_action(self, messages: Messages, agent_state: Any) -> tuple[str | AgentAction, Any]: ...


def as_action(agent: Any, result: Any) -> tuple[AgentAction, Any]:
    """Check what an agent returned and normalise the reply to an AgentAction.

    A reply holding surrogate code points (``"\\ud800"``, which no UTF-8 consumer
    accepts) is repaired here, at the agent boundary: pairs are joined, lone ones
    become U+FFFD, and the step's info records how many were repaired under
    ``repaired_surrogates``. Token ids the agent sampled are kept as they are.
    """
    if not (isinstance(result, tuple) and len(result) == 2):
        hint = " (an async get_action must be awaited)" if inspect.iscoroutine(result) else ""
        if inspect.iscoroutine(result):
            result.close()
        raise AgentError(
            f"{type(agent).__name__}.get_action must return (reply, agent_state), got "
            f"{type(result).__name__}: {result!r:.200}{hint}"
        )
    reply, new_state = result
    if isinstance(reply, str):
        return _repaired(AgentAction(text=reply)), new_state
    if isinstance(reply, AgentAction):
        if not isinstance(reply.text, str):
            raise AgentError(
                f"{type(agent).__name__}.get_action returned an AgentAction whose text is "
                f"{type(reply.text).__name__}; it must be the reply as a str"
            )
        return _repaired(reply), new_state
    raise AgentError(
        f"{type(agent).__name__}.get_action returned a reply of type "
        f"{type(reply).__name__}; expected str or agentsgym.AgentAction"
    )


def _repaired(action: AgentAction) -> AgentAction:
    text, count = repair_text(action.text)
    if count:
        action.text = text
        action.info = {**action.info, REPAIRED_SURROGATES_KEY: count}
    return action


@functools.lru_cache(maxsize=256)
def _signature_of(method: Callable[..., Any]) -> tuple[bool, frozenset[str]]:
    """(is async, named parameters) of a get_action."""
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return inspect.iscoroutinefunction(method), frozenset()
    names = frozenset(p.name for p in parameters if p.kind is not inspect.Parameter.VAR_KEYWORD)
    return inspect.iscoroutinefunction(method), names


class AgentCaller:
    """Calls one agent the way its ``get_action`` wants to be called."""

    def __init__(self, agent: Any) -> None:
        method = getattr(agent, "get_action", None)
        if not callable(method):
            raise AgentError(
                f"{type(agent).__name__} is not an agent: it has no get_action(messages, "
                "agent_state) method"
            )
        self.agent = agent
        self.is_async, names = _signature_of(getattr(type(agent), "get_action", method))
        self.token_in = bool(getattr(agent, "wants_prompt_token_ids", False))
        # Only a get_action that names `context` gets it: a wrapper taking **kwargs
        # usually forwards them to an agent that does not.
        self.takes_context = "context" in names
        self.run_inline = bool(getattr(agent, "run_inline", False))

    def _kwargs(
        self, prompt_token_ids: list[int] | None, context: EpisodeContext | None
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if self.token_in:
            kwargs["prompt_token_ids"] = prompt_token_ids
        if self.takes_context and context is not None:
            kwargs["context"] = context
        return kwargs

    async def act(
        self,
        messages: Messages,
        agent_state: Any,
        *,
        prompt_token_ids: list[int] | None = None,
        context: EpisodeContext | None = None,
        pool: WorkerPool | None = None,
    ) -> tuple[AgentAction, Any]:
        """The agent's reply; plain agents run in ``pool`` (default: asyncio's
        executor) unless inline."""
        kwargs = self._kwargs(prompt_token_ids, context)
        if self.is_async:
            result = await self.agent.get_action(list(messages), agent_state, **kwargs)
        elif self.run_inline:
            result = self.agent.get_action(list(messages), agent_state, **kwargs)
        else:
            call = functools.partial(self.agent.get_action, list(messages), agent_state, **kwargs)
            if pool is not None:
                result = await pool.run(call)
            else:
                result = await asyncio.get_running_loop().run_in_executor(None, call)
        return as_action(self.agent, result)

    def act_sync(
        self,
        messages: Messages,
        agent_state: Any,
        *,
        prompt_token_ids: list[int] | None = None,
        context: EpisodeContext | None = None,
    ) -> tuple[AgentAction, Any]:
        """The agent's reply, from plain code (an async agent runs on the background loop)."""
        kwargs = self._kwargs(prompt_token_ids, context)
        if self.is_async:
            from agentsgym.aio import run_sync

            result = run_sync(self.agent.get_action(list(messages), agent_state, **kwargs))
        else:
            result = self.agent.get_action(list(messages), agent_state, **kwargs)
        return as_action(self.agent, result)


def call_agent(
    agent: Agent,
    messages: Messages,
    agent_state: Any,
    prompt_token_ids: list[int] | None = None,
    *,
    context: EpisodeContext | None = None,
) -> tuple[AgentAction, Any]:
    """Call any agent (sync or async) from plain code and check what it returned.

    For code that asks an agent something itself, such as an env's game master:
    safe from the runner's worker threads.
    """
    return AgentCaller(agent).act_sync(
        messages, agent_state, prompt_token_ids=prompt_token_ids, context=context
    )


async def acall_agent(
    agent: Agent,
    messages: Messages,
    agent_state: Any,
    prompt_token_ids: list[int] | None = None,
    *,
    context: EpisodeContext | None = None,
) -> tuple[AgentAction, Any]:
    """Call any agent (sync or async) from a coroutine; plain agents run in a thread."""
    return await AgentCaller(agent).act(
        messages, agent_state, prompt_token_ids=prompt_token_ids, context=context
    )


def follow_concurrency(agent: Any, max_concurrency: int) -> None:
    """Tell an agent the run's ``max_concurrency`` (agents that implement the hook)."""
    hook = getattr(agent, "follow_concurrency", None)
    if callable(hook):
        hook(max_concurrency)
