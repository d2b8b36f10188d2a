"""How the runner calls one env's episode hooks: off the event loop, within a budget.

An env turn (the hooks between two agent actions, plus tokenizing) is one coroutine
from :mod:`agentsgym.engine.session`. With plain hooks it runs in one worker thread,
without a loop (:func:`agentsgym.aio.drive`): a slow hook never stalls other episodes,
and a turn costs one thread hop, not one per hook. With ``run_hooks_inline = True``
(hooks computing in microseconds) it runs on the loop, as a thread hop would cost more
than the turn (each GIL handover may wait on the OS scheduler). With ``async def``
hooks it runs on the loop, and tokenizing goes to a worker thread.

A turn over ``hook_timeout_seconds`` raises :class:`~agentsgym.errors.EpisodeTimeoutError`:
a plain hook cannot be interrupted, so it is abandoned in its thread and nothing it
does afterwards reaches the episode; an inline turn fails its episode when it returns.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from agentsgym.aio import drive
from agentsgym.engine.hook_calls import call_hook, has_async_impls, is_firstresult
from agentsgym.errors import EpisodeTimeoutError
from agentsgym.worker_pool import WorkerPool

if TYPE_CHECKING:
    from agentsgym.engine.playable import PlayableEnv

logger = logging.getLogger(__name__)

T = TypeVar("T")

INLINE_TURN_LIMIT_SECONDS = 1.0
"""An inline turn this slow stalled every other episode (its hooks wait after all).
Generous: on a loaded machine the OS alone can hold a thread for a few hundred ms."""

EPISODE_HOOK_NAMES = (
    "initialize_episode",
    "turn_role",
    "format_prompt",
    "step_episode",
    "reward_shaping",
    "finish_episode",
    "role_rewards",
)


def has_async_hooks(env: PlayableEnv) -> bool:
    """Whether any episode hook implementation in the env's relay is ``async def``."""
    callers = [getattr(env.hook, name, None) for name in EPISODE_HOOK_NAMES]
    return has_async_impls(c for c in callers if c is not None)


async def _resolve(result: Any) -> Any:
    """Await a hook's result (or each element of an every-implementation result list)."""
    if inspect.isawaitable(result):
        return await result
    if isinstance(result, list) and any(inspect.isawaitable(r) for r in result):
        return [await r if inspect.isawaitable(r) else r for r in result]
    return result


class HookRuntime:
    """Calls the episode hooks of one env during one run."""

    def __init__(self, env: PlayableEnv, pool: WorkerPool) -> None:
        self.env = env
        self.pool = pool
        self.is_async = has_async_hooks(env)
        self.inline = not self.is_async and bool(getattr(env, "run_hooks_inline", False))
        self.warm = False  # the first turn also compiles templates and fills caches
        self._callers = {name: getattr(env.hook, name) for name in EPISODE_HOOK_NAMES}
        self._firstresult = {name: is_firstresult(c) for name, c in self._callers.items()}

    async def call(self, name: str, **kwargs: Any) -> Any:
        """One hook call inside a turn, with ``env=`` added."""
        kwargs["env"] = self.env
        result = call_hook(
            self.env.plugin_manager, self._callers[name], self._firstresult[name], kwargs
        )
        return await _resolve(result) if self.is_async else result

    async def cpu(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """CPU work inside a turn: in place in a plain turn, in a worker for async hooks."""
        if not self.is_async:
            return fn(*args, **kwargs)
        return await self.pool.run(lambda: fn(*args, **kwargs))

    async def turn(
        self, make: Callable[[], Coroutine[Any, Any, T]], describe: Callable[[], str]
    ) -> T:
        """Run the turn ``make()`` creates within ``hook_timeout_seconds``; it is created
        where it runs, so a turn cancelled before it started leaves nothing behind."""
        budget = self.env.config.hook_timeout_seconds
        try:
            if self.inline:
                return self._inline_turn(make, describe, budget)
            if self.is_async:
                return await asyncio.wait_for(make(), budget)
            return await self.pool.run(lambda: drive(make()), timeout=budget)
        except asyncio.TimeoutError:
            raise EpisodeTimeoutError(
                f"{describe()} of {self.env.env_id} did not return within "
                f"hook_timeout_seconds={budget:g}; the episode was abandoned (raise the "
                "budget with --env-config hook_timeout_seconds=N if the hook is just slow)"
            ) from None

    def _inline_turn(
        self, make: Callable[[], Coroutine[Any, Any, T]], describe: Callable[[], str], budget: float
    ) -> T:
        start = time.perf_counter()
        try:
            result = drive(make())
        finally:
            elapsed = time.perf_counter() - start
            if elapsed > INLINE_TURN_LIMIT_SECONDS and self.inline and self.warm:
                self.inline = False
                # the env author's setting, not the user's to act on: check_env reports it
                logger.debug(
                    "%s of %s took %.0f ms on the event loop, stalling every other episode; "
                    "the env sets run_hooks_inline = True, which promises hooks that never "
                    "wait: its turns run in worker threads for the rest of this run",
                    describe(),
                    self.env.env_id,
                    elapsed * 1e3,
                )
        self.warm = True
        if elapsed > budget:
            raise EpisodeTimeoutError(
                f"{describe()} of {self.env.env_id} took {elapsed:.3g} s, over "
                f"hook_timeout_seconds={budget:g} (an inline turn cannot be abandoned while "
                "it runs; the episode fails now that it returned)"
            )
        return result
