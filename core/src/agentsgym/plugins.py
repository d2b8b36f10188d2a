"""Plugin discovery: the load-time plugin manager and its controls (:class:`LoadSettings`).

Plugins are modules (or any object with ``@hookimpl`` methods) published under the
``agentsgym`` entry-point group. Each loads in its own ``try``: a broken plugin is
recorded (and listed by ``agentsgym list-envs``) while the others keep working; strict
mode re-raises, for authors who want the traceback. The ``register_*`` hooks are called
through pluggy one plugin at a time (:meth:`PluginHost.call_each`), so that a plugin
whose hook raises is recorded alone.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from importlib.metadata import EntryPoint, entry_points, version
from typing import Any

from agentsgym import hookspecs
from agentsgym.engine.hook_calls import AgentsGymPluginManager
from agentsgym.errors import PluginLoadError

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "agentsgym"
BUILTIN_PLUGIN = "agentsgym.builtin.plugin"


@dataclass
class PluginInfo:
    """One plugin as loaded (or as it failed to load)."""

    name: str
    distribution: str | None
    version: str | None
    entry_point: str
    builtin: bool = False
    error: str | None = None
    plugin: object | None = field(default=None, repr=False)
    """What the entry point loaded: a module, or an object with ``@hookimpl`` methods."""
    hooks: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class LoadSettings:
    """How plugins are loaded. The lists hold entry-point or distribution names."""

    allowlist: frozenset[str] | None = None  # AGENTSGYM_PLUGINS: load only these
    blocklist: frozenset[str] = frozenset()  # AGENTSGYM_BLOCK_PLUGINS: never these
    autoload: bool = True  # AGENTSGYM_DISABLE_PLUGIN_AUTOLOAD=1: built-ins only
    strict: bool = False  # AGENTSGYM_STRICT_PLUGINS=1: a failing plugin raises

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> LoadSettings:
        env = os.environ if environ is None else environ
        allow = _split_names(env.get("AGENTSGYM_PLUGINS", ""))
        return cls(
            allowlist=frozenset(allow) if allow else None,
            blocklist=frozenset(_split_names(env.get("AGENTSGYM_BLOCK_PLUGINS", ""))),
            autoload=not _truthy(env.get("AGENTSGYM_DISABLE_PLUGIN_AUTOLOAD", "")),
            strict=_truthy(env.get("AGENTSGYM_STRICT_PLUGINS", "")),
        )


def _split_names(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _truthy(value: str) -> bool:
    return value.strip().lower() in {"1", "true", "yes", "on"}


def new_plugin_manager() -> AgentsGymPluginManager:
    """A plugin manager with every agentsgym hook spec added."""
    pm = AgentsGymPluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    return pm


def _distribution_version(name: str) -> str | None:
    try:
        return version(name)
    except Exception:  # noqa: BLE001 - a source checkout without metadata
        return None


class PluginHost:
    """The load-time plugin manager plus what was loaded and what failed."""

    def __init__(self, settings: LoadSettings) -> None:
        self.settings = settings
        self.pm = new_plugin_manager()
        self.plugins: list[PluginInfo] = []

    def load(self, extra_entry_points: Iterable[EntryPoint] | None = None) -> None:
        core = _distribution_version("agentsgym")
        builtin = PluginInfo("agentsgym.builtin", "agentsgym", core, BUILTIN_PLUGIN, builtin=True)
        self._load_one(builtin, partial(importlib.import_module, BUILTIN_PLUGIN))
        if not self.settings.autoload:
            logger.info("plugin autoload disabled; only built-in plugins are loaded")
            return
        eps = [*entry_points(group=ENTRY_POINT_GROUP), *(extra_entry_points or ())]
        for ep in sorted(eps, key=lambda e: e.name):
            dist = ep.dist.name if ep.dist is not None else None
            if not self._wanted(ep.name, dist):
                logger.info("skipping plugin %s (not allowed by the load settings)", ep.name)
                continue
            dist_version = ep.dist.version if ep.dist is not None else None
            self._load_one(PluginInfo(ep.name, dist, dist_version, ep.value), ep.load)

    def _wanted(self, name: str, distribution: str | None) -> bool:
        names = {name} | ({distribution} if distribution else set())
        if names & self.settings.blocklist:
            return False
        return self.settings.allowlist is None or bool(names & self.settings.allowlist)

    def _load_one(self, info: PluginInfo, loader: Callable[[], object]) -> None:
        self.plugins.append(info)
        try:
            plugin = loader()
            self.pm.register(plugin, name=info.name)
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the others
            self.record_failure(info, exc, "failed to load")
            return
        info.plugin = plugin
        info.hooks = sorted(h.name for h in (self.pm.get_hookcallers(plugin) or []) if h.name)

    def call_each(
        self,
        hook_name: str,
        kwargs_of: Callable[[PluginInfo], Mapping[str, Any]],
        *,
        reraise: tuple[type[BaseException], ...] = (),
    ) -> None:
        """Call the load-time hook ``hook_name`` through pluggy, one plugin at a time, in
        pluggy's order (``tryfirst``/``trylast``, else the last loaded first), with the
        arguments ``kwargs_of(plugin)`` gives (a ``register`` bound to that plugin).

        Each call holds one plugin's implementation and every wrapper (``wrapper=True``),
        so a wrapper wraps each plugin's call. A plugin whose call raises is recorded as
        failed and skipped from then on; the others go on. Exceptions of the ``reraise``
        types (a clash the user must fix) propagate.
        """
        implementations = getattr(self.pm.hook, hook_name).get_hookimpls()
        plain = [i for i in implementations if not (i.wrapper or i.hookwrapper)]
        by_name = {info.name: info for info in self.plugins}
        for implementation in reversed(plain):  # pluggy calls the list from its end
            info = by_name.get(implementation.plugin_name)
            if info is None or not info.ok:
                continue
            others = [i.plugin for i in plain if i is not implementation]
            call = self.pm.subset_hook_caller(hook_name, remove_plugins=others)
            try:
                call(**kwargs_of(info))
            except reraise:
                raise
            except Exception as exc:  # noqa: BLE001 - any other failure breaks this plugin alone
                self.record_failure(info, exc)

    def record_failure(self, info: PluginInfo, exc: BaseException, what: str = "failed") -> None:
        """Mark a plugin as broken (it failed to load, or one of its hooks raised)."""
        info.error = f"{type(exc).__name__}: {exc}"
        logger.warning("plugin %s (%s) %s: %s", info.name, info.distribution, what, info.error)
        if self.settings.strict:
            raise PluginLoadError(info.name, info.distribution, exc) from exc


_lock = threading.Lock()
_host: PluginHost | None = None


def load_plugins(settings: LoadSettings | None = None, *, reload: bool = False) -> PluginHost:
    """Load (once) and return the process-wide plugin host."""
    global _host
    with _lock:
        if _host is None or reload or settings is not None:
            host = PluginHost(settings or LoadSettings.from_environ())
            host.load()
            _host = host
        return _host


def reset_plugins() -> None:
    """Forget loaded plugins; the next use loads them again (tests, notebooks)."""
    global _host
    with _lock:
        _host = None
