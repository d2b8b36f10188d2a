"""Calling pluggy hooks on the engine's hot path, through pluggy's public API only.

An env turn calls four or five hooks, and for most envs each hook has exactly one
implementation (the env's own method). pluggy's generic call costs several
microseconds per hook (argument checks, a copy of the implementation list, the
wrapper loop), a large share of a fast env's turn, so such a hook is called directly
here, with pluggy's result semantics. Anything else goes through pluggy: several
implementations, wrappers, an implementation asking for an argument the call does
not pass, and a plugin manager whose calls are monitored or traced (monitoring
replaces how pluggy executes hooks, and a direct call would bypass it).

Everything used here is public in pluggy 1.x (``HookCaller.get_hookimpls``,
``HookImpl.function/argnames/wrapper/hookwrapper``, ``HookCaller.spec.opts``,
``PluginManager.add_hookcall_monitoring``); the core pins ``pluggy>=1.5,<2``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

import pluggy


class AgentsGymPluginManager(pluggy.PluginManager):
    """A plugin manager that knows whether its hook calls are monitored.

    ``enable_tracing`` goes through ``add_hookcall_monitoring`` too, so counting the
    active monitors here is enough to know when a direct call would skip one.
    """

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
    direct = (
        len(impls) <= 1
        and isinstance(manager, AgentsGymPluginManager)
        and manager.active_monitors == 0
    )
    if direct:
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
