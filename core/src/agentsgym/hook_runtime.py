"""How the runner calls one env's episode hooks: off the event loop, within a budget.

An env turn (the hook calls between two agent actions, plus tokenizing them) is
written once, as a coroutine, by :mod:`agentsgym.episode`. This module runs it:

* **plain hooks** (the usual case): the whole turn runs in one worker thread, driven
  without an event loop (:func:`agentsgym.aio.drive`), so a slow hook never stalls
  other episodes' agent calls and a turn costs one thread hop, not one per hook;
* **async hooks** (``async def``, e.g. an env served over HTTP): the turn runs on the
  event loop, each hook's coroutine is awaited, and CPU work (tokenization) goes to
  a worker thread.

Either way the turn must finish within the env's ``hook_timeout_seconds``; a turn
over budget raises :class:`~agentsgym.errors.EpisodeTimeoutError`. A plain hook
cannot be interrupted: it is abandoned in its worker thread, which holds a pool slot
until it returns, and the episode that owned it is marked so that nothing it does
afterwards reaches the episode's record.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from agentsgym.aio import drive
from agentsgym.errors import EpisodeTimeoutError
from agentsgym.worker_pool import WorkerPool

if TYPE_CHECKING:
    from agentsgym.env import MultistepEnv

T = TypeVar("T")

EPISODE_HOOK_NAMES = (
    "initialize_episode",
    "format_prompt",
    "step_episode",
    "reward_shaping",
    "finish_episode",
)


def has_async_hooks(env: MultistepEnv) -> bool:
    """Whether any episode hook implementation in the env's relay is ``async def``."""
    for name in EPISODE_HOOK_NAMES:
        caller = getattr(env.hook, name, None)
        if caller is None:
            continue
        for impl in caller.get_hookimpls():
            if inspect.iscoroutinefunction(impl.function):
                return True
    return False


async def _resolve(result: Any) -> Any:
    """Await a hook's result (or each element of an every-implementation result list)."""
    if inspect.isawaitable(result):
        return await result
    if isinstance(result, list) and any(inspect.isawaitable(r) for r in result):
        return [await r if inspect.isawaitable(r) else r for r in result]
    return result


class HookRuntime:
    """Calls the episode hooks of one env during one run."""

    def __init__(self, env: MultistepEnv, pool: WorkerPool) -> None:
        self.env = env
        self.pool = pool
        self.is_async = has_async_hooks(env)

    async def call(self, name: str, **kwargs: Any) -> Any:
        """One hook call, inside a turn; ``env=`` is added."""
        result = getattr(self.env.hook, name)(env=self.env, **kwargs)
        return await _resolve(result) if self.is_async else result

    async def cpu(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """CPU work inside a turn: inline in a plain turn (already off the loop)."""
        if not self.is_async:
            return fn(*args, **kwargs)
        return await self.pool.run(lambda: fn(*args, **kwargs))

    async def turn(
        self, make: Callable[[], Coroutine[Any, Any, T]], describe: Callable[[], str]
    ) -> T:
        """Run the turn ``make()`` creates within ``hook_timeout_seconds``.

        The coroutine is created where it runs (a worker thread for plain hooks), so a
        turn cancelled before it started leaves nothing behind. ``describe`` names
        what was running, for the timeout message.
        """
        budget = self.env.config.hook_timeout_seconds
        try:
            if self.is_async:
                return await asyncio.wait_for(make(), budget)
            return await self.pool.run(lambda: drive(make()), timeout=budget)
        except asyncio.TimeoutError:
            raise EpisodeTimeoutError(
                f"{describe()} of {self.env.env_id} did not return within "
                f"hook_timeout_seconds={budget:g}; the episode was abandoned (raise the "
                "budget with --env-config hook_timeout_seconds=N if the hook is just slow)"
            ) from None
