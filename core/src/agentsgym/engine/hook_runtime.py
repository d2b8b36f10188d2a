"""How the runner calls one env's episode hooks: off the event loop, within a budget.

An env turn (the hook calls between two agent actions, plus tokenizing them) is
written once, as a coroutine, by :mod:`agentsgym.engine.episode`. This module runs it:

* **plain hooks** (the usual case): the whole turn runs in one worker thread, driven
  without an event loop (:func:`agentsgym.aio.drive`), so a slow hook never stalls
  other episodes' agent calls and a turn costs one thread hop, not one per hook;
* **plain hooks of an env that sets** ``run_hooks_inline = True`` (hooks that only
  compute on the state, in microseconds, and never wait: board games, puzzles, an
  offline judge): the turn runs on the event loop itself, like a ``run_inline``
  agent. Handing a turn of a few dozen microseconds to a worker thread costs more
  than the turn: the worker and the loop take turns holding the GIL, and on a busy
  machine each handover can wait for the OS scheduler for milliseconds;
* **async hooks** (``async def``, e.g. an env served over HTTP): the turn runs on the
  event loop, each hook's coroutine is awaited, and CPU work (tokenization) goes to
  a worker thread.

Either way the turn must finish within the env's ``hook_timeout_seconds``; a turn
over budget raises :class:`~agentsgym.errors.EpisodeTimeoutError`. A plain hook
cannot be interrupted: it is abandoned in its worker thread, which holds a pool slot
until it returns, and the episode that owned it is marked so that nothing it does
afterwards reaches the episode's record. An inline turn cannot be abandoned (it
holds the loop until it returns): one over budget fails its episode when it
returns, and one over :data:`INLINE_TURN_LIMIT_SECONDS` sends the env's turns back
to worker threads for the rest of the run, with a warning.
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
"""An inline turn that takes longer than this stalled every other episode that long
(an env whose hooks wait after all): its turns go back to worker threads for the rest
of the run. Generous, because on a loaded machine the OS alone can hold a thread for
a few hundred milliseconds."""

EPISODE_HOOK_NAMES = (
    "initialize_episode",
    "format_prompt",
    "step_episode",
    "reward_shaping",
    "finish_episode",
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
        self._callers = {name: getattr(env.hook, name) for name in EPISODE_HOOK_NAMES}
        self._firstresult = {name: is_firstresult(c) for name, c in self._callers.items()}

    async def call(self, name: str, **kwargs: Any) -> Any:
        """One hook call, inside a turn; ``env=`` is added. A hook with a single plain
        implementation is called directly (see :mod:`agentsgym.engine.hook_calls`)."""
        kwargs["env"] = self.env
        result = call_hook(
            self.env.plugin_manager, self._callers[name], self._firstresult[name], kwargs
        )
        return await _resolve(result) if self.is_async else result

    async def cpu(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """CPU work inside a turn: inline in a plain turn (already in its worker thread,
        or on the loop for an env that sets ``run_hooks_inline``)."""
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
            if elapsed > INLINE_TURN_LIMIT_SECONDS and self.inline:
                self.inline = False
                logger.warning(
                    "%s of %s took %.0f ms on the event loop, stalling every other episode; "
                    "the env sets run_hooks_inline = True, which promises hooks that never "
                    "wait: its turns run in worker threads for the rest of this run",
                    describe(),
                    self.env.env_id,
                    elapsed * 1e3,
                )
        if elapsed > budget:
            raise EpisodeTimeoutError(
                f"{describe()} of {self.env.env_id} took {elapsed:.3g} s, over "
                f"hook_timeout_seconds={budget:g} (an inline turn cannot be abandoned while "
                "it runs; the episode fails now that it returned)"
            )
        return result
