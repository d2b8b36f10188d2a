"""check_env's check of an env's ``run_hooks_inline`` promise: plain hooks that return
at once, so that running them on the event loop stalls no other episode. The engine
quietly moves a broken promise back to worker threads during a run; an author learns
of it here."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

from agentsgym.engine import hook_runtime
from agentsgym.hookspecs import hookimpl
from agentsgym.testing.check_report import CheckFailed

__all__ = ["HookTimer", "check_inline_promise"]


class HookTimer:
    """A plugin for an env's hook relay: the seconds each episode hook call took."""

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = defaultdict(list)

    def _timed(self, name: str) -> Any:
        start = time.perf_counter()
        try:
            return (yield)
        finally:
            self.seconds[name].append(time.perf_counter() - start)

    @hookimpl(wrapper=True)
    def initialize_episode(self) -> Any:
        return (yield from self._timed("initialize_episode"))

    @hookimpl(wrapper=True)
    def format_prompt(self) -> Any:
        return (yield from self._timed("format_prompt"))

    @hookimpl(wrapper=True)
    def step_episode(self) -> Any:
        return (yield from self._timed("step_episode"))


def check_inline_promise(env: Any, timer: HookTimer) -> str:
    """Fail when ``env`` sets ``run_hooks_inline`` and a hook call (after each hook's
    first, which warms caches) took longer than the engine allows an inline turn."""
    if not getattr(env, "run_hooks_inline", False):
        return "the env runs its plain hooks in worker threads"
    limit = hook_runtime.INLINE_TURN_LIMIT_SECONDS
    slow = {
        name: max(calls[1:])
        for name, calls in timer.seconds.items()
        if len(calls) > 1 and max(calls[1:]) > limit
    }
    if slow:
        name, seconds = max(slow.items(), key=lambda item: item[1])
        raise CheckFailed(
            f"the env sets run_hooks_inline = True, but {name} took {seconds * 1e3:.0f} ms "
            f"(over {limit * 1e3:.0f} ms) on the event loop, stalling every other episode; "
            "set it only when the plain hooks never wait (no I/O, no sleeps), or make the "
            "waiting hooks async"
        )
    calls = sum(len(c) for c in timer.seconds.values())
    return f"{calls} hook calls returned at once"
