"""Calling pluggy hooks on the engine's hot path, through pluggy's public API only.

Most envs have one implementation per episode hook (their own method), and pluggy's
generic call costs several microseconds (argument checks, a copy of the implementation
list, the wrapper loop): a large share of a fast env's turn. So a hook with one plain
implementation is called directly, with pluggy's result semantics; anything else
(several implementations, wrappers, a missing argument, monitored or traced calls)
goes through pluggy. The core pins ``pluggy>=1.5,<2``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

import pluggy


class AgentsGymPluginManager(pluggy.PluginManager):
    """A plugin manager that counts its active hook call monitors (tracing included)."""

    def __init__(self, project_name: str) -> None:
        super().__init__(project_name)
        self.active_monitors = 0

    def add_hookcall_monitoring(self, before: Any, after: Any) -> Callable[[], None]:
        undo = super().add_hookcall_monitoring(before, after)
        self.active_monitors += 1
        undone = False

        def undo_once() -> None:
            nonlocal undone
            if not undone:
                undone = True
                self.active_monitors -= 1
                undo()

        return undo_once


def is_firstresult(caller: pluggy.HookCaller) -> bool:
    """Whether the hook's spec says the first non-``None`` result wins."""
    return bool(caller.spec is not None and caller.spec.opts.get("firstresult"))


def has_async_impls(callers: Iterable[pluggy.HookCaller]) -> bool:
    """Whether any implementation of these hooks is an ``async def``."""
    return any(
        inspect.iscoroutinefunction(impl.function)
        for caller in callers
        for impl in caller.get_hookimpls()
    )


def call_hook(
    manager: pluggy.PluginManager,
    caller: pluggy.HookCaller,
    firstresult: bool,
    kwargs: dict[str, Any],
) -> Any:
    """``caller(**kwargs)``, called directly where that gives pluggy's own result."""
    impls = caller.get_hookimpls()
    may_be_monitored = not isinstance(manager, AgentsGymPluginManager) or manager.active_monitors
    if len(impls) <= 1 and not may_be_monitored:
        if not impls:
            return None if firstresult else []
        impl = impls[0]
        if not (impl.wrapper or impl.hookwrapper):
            try:
                args = [kwargs[name] for name in impl.argnames]
            except KeyError:
                pass  # pluggy raises its HookCallError naming the argument
            else:
                result = impl.function(*args)
                if firstresult:
                    return result
                return [] if result is None else [result]
    return caller(**kwargs)
