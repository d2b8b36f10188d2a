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

    ``get_action(messages, agent_state)`` returns ``(reply, agent_state)``: the text, or
    an :class:`AgentAction` with sampled token ids and logprobs. Async agents are awaited
    on the runner's loop, plain ones run in worker threads unless ``run_inline = True``
    (instant, never blocking). ``agent_state`` starts as ``None`` in every trial and is
    kept across its episodes. ``context`` (an :class:`~agentsgym.types.EpisodeContext`)
    is passed when declared; token-in agents (``wants_prompt_token_ids = True``) get
    ``prompt_token_ids``, the episode's exact ids, or ``None`` when there are none.
    ``follow_concurrency(max_concurrency)``, if defined, receives the run's setting.
    """

    def get_action(self, messages: Messages, agent_state: Any) -> tuple[str | AgentAction, Any]: ...


def as_action(agent: Any, result: Any) -> tuple[AgentAction, Any]:
    """Check what an agent returned and normalise the reply to an AgentAction, with
    surrogate code points in its text repaired (sampled token ids are kept as they are)."""
    name = type(agent).__name__
    if not (isinstance(result, tuple) and len(result) == 2):
        hint = ""
        if inspect.iscoroutine(result):
            result.close()
            hint = " (an async get_action must be awaited)"
        raise AgentError(
            f"{name}.get_action must return (reply, agent_state), got "
            f"{type(result).__name__}: {result!r:.200}{hint}"
        )
    reply, new_state = result
    if isinstance(reply, str):
        reply = AgentAction(text=reply)
    elif not isinstance(reply, AgentAction):
        raise AgentError(
            f"{name}.get_action returned a reply of type {type(reply).__name__}; expected "
            "str or agentsgym.AgentAction"
        )
    elif not isinstance(reply.text, str):
        raise AgentError(
            f"{name}.get_action returned an AgentAction whose text is "
            f"{type(reply.text).__name__}; it must be the reply as a str"
        )
    text, count = repair_text(reply.text)
    if count:
        reply.text = text
        reply.info = {**reply.info, REPAIRED_SURROGATES_KEY: count}
    return reply, new_state


@functools.lru_cache(maxsize=256)
def _signature_of(method: Callable[..., Any]) -> tuple[bool, frozenset[str]]:
    """(is async, named parameters) of a get_action."""
    try:
        parameters = list(inspect.signature(method).parameters.values())
    except (TypeError, ValueError):
        parameters = []
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
        # Only if named: a wrapper taking **kwargs usually forwards them to one that does not.
        self.takes_context = "context" in names
        self.run_inline = bool(getattr(agent, "run_inline", False))

    def _bind(
        self, messages: Messages, state: Any, ids: list[int] | None, context: EpisodeContext | None
    ) -> Callable[[], Any]:
        """``get_action`` with the arguments it takes, ready to call."""
        kwargs: dict[str, Any] = {}
        if self.token_in:
            kwargs["prompt_token_ids"] = ids
        if self.takes_context and context is not None:
            kwargs["context"] = context
        return functools.partial(self.agent.get_action, list(messages), state, **kwargs)

    async def act(
        self,
        messages: Messages,
        agent_state: Any,
        *,
        prompt_token_ids: list[int] | None = None,
        context: EpisodeContext | None = None,
        pool: WorkerPool | None = None,
    ) -> tuple[AgentAction, Any]:
        """The agent's reply; plain agents run in ``pool`` (default: asyncio's executor)."""
        call = self._bind(messages, agent_state, prompt_token_ids, context)
        if self.is_async:
            result = await call()
        elif self.run_inline:
            result = call()
        elif pool is not None:
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
        call = self._bind(messages, agent_state, prompt_token_ids, context)
        if self.is_async:
            from agentsgym.aio import run_sync

            return as_action(self.agent, run_sync(call()))
        return as_action(self.agent, call())


def call_agent(
    agent: Agent,
    messages: Messages,
    agent_state: Any,
    prompt_token_ids: list[int] | None = None,
    *,
    context: EpisodeContext | None = None,
) -> tuple[AgentAction, Any]:
    """Call any agent from plain code (an env's game master, say; safe in worker threads)."""
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
