"""Agents that test envs: a deterministic agent slowed down so that episodes interleave."""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
from typing import Any

from agentsgym.agents import AgentCaller

logger = logging.getLogger(__name__)

__all__ = ["AsyncSlowAgent", "SlowAgent", "slow_agent"]


class SlowAgent:
    """Wraps a deterministic agent: sleeps a few milliseconds before every reply.

    check_env plays with it so that concurrent episodes interleave the way they do
    against a model server. With ``rendezvous=n``, the first ``n`` calls wait for each
    other (at most ``rendezvous_timeout`` seconds), so at least ``n`` episodes are in
    flight at once however slow the machine is: an env that shares random or
    per-episode state between them is caught for certain, not by luck of timing.
    """

    def __init__(
        self,
        agent: Any,
        delay: float = 0.002,
        *,
        rendezvous: int = 0,
        rendezvous_timeout: float = 10.0,
    ) -> None:
        self.agent = agent
        self.delay = delay
        caller = AgentCaller(agent)
        self.wants_prompt_token_ids = caller.token_in
        self._takes_context = caller.takes_context
        self._expected = rendezvous
        self._timeout = rendezvous_timeout
        self._arrived = 0
        self._cond = threading.Condition()

    def _pause(self, messages: list[dict[str, str]]) -> float:
        # 1-3 delays, varying with the conversation, so interleavings vary too.
        return self.delay * (1 + len(messages) % 3)

    def _kwargs(self, prompt_token_ids: list[int] | None, context: Any) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if self.wants_prompt_token_ids:
            kwargs["prompt_token_ids"] = prompt_token_ids
        if context is not None and self._takes_context:
            kwargs["context"] = context
        return kwargs

    def _all_arrived(self) -> bool:
        return self._arrived >= self._expected

    def _arrive(self) -> bool:
        """Count this call; True when it has to wait for others."""
        if not self._all_arrived():
            self._arrived += 1
        return not self._all_arrived()

    def _gave_up(self) -> None:
        logger.warning(
            "check_env: %d episodes never ran at once within %.0fs; the runner may be limited "
            "to fewer concurrent episodes, so the concurrency check is weaker",
            self._expected,
            self._timeout,
        )
        self._expected = 0

    def get_action(
        self,
        messages: list[dict[str, str]],
        agent_state: Any,
        *,
        prompt_token_ids: list[int] | None = None,
        context: Any = None,
    ) -> Any:
        with self._cond:
            if self._arrive() and not self._cond.wait_for(self._all_arrived, self._timeout):
                self._gave_up()
            self._cond.notify_all()
        if self.delay:
            time.sleep(self._pause(messages))
        kwargs = self._kwargs(prompt_token_ids, context)
        return self.agent.get_action(messages, agent_state, **kwargs)


class AsyncSlowAgent(SlowAgent):
    """:class:`SlowAgent` for an async agent: waits without blocking the runner's loop."""

    _async_cond: asyncio.Condition | None = None

    async def get_action(  # type: ignore[override]
        self,
        messages: list[dict[str, str]],
        agent_state: Any,
        *,
        prompt_token_ids: list[int] | None = None,
        context: Any = None,
    ) -> Any:
        if self._async_cond is None:  # created on first use, on the runner's event loop
            self._async_cond = asyncio.Condition()
        cond = self._async_cond
        async with cond:
            if self._arrive():
                try:
                    await asyncio.wait_for(cond.wait_for(self._all_arrived), self._timeout)
                except asyncio.TimeoutError:
                    self._gave_up()
            cond.notify_all()
        if self.delay:
            await asyncio.sleep(self._pause(messages))
        kwargs = self._kwargs(prompt_token_ids, context)
        return await self.agent.get_action(messages, agent_state, **kwargs)


def slow_agent(agent: Any, delay: float = 0.002, **kwargs: Any) -> SlowAgent:
    """A :class:`SlowAgent` around ``agent``, an :class:`AsyncSlowAgent` if it is async."""
    if inspect.iscoroutinefunction(getattr(agent, "get_action", None)):
        return AsyncSlowAgent(agent, delay, **kwargs)
    return SlowAgent(agent, delay, **kwargs)
