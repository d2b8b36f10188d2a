"""The registry: env ids, agents and trainer adapters registered by plugins.

It is built on first use from the plugins that :mod:`agentsgym.plugins` loaded, by
calling each plugin's ``register_*`` hooks with a ``register`` callback that knows
which distribution is registering (so a clash can name both packages).
"""

from __future__ import annotations

import difflib
import importlib
import logging
import os
import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from agentsgym.errors import (
    RegistrationError,
    UnknownAgentError,
    UnknownEnvError,
    UnknownTrainerError,
    UntrustedClassPathError,
    UntrustedRemoteEnvError,
)
from agentsgym.plugins import PluginHost, PluginInfo, load_plugins
from agentsgym.serve.urls import (
    is_remote_url,
    remote_envs_allowed_from_environ,
    split_protocol,
    url_allowed,
)

if TYPE_CHECKING:
    from agentsgym.env import MultistepEnv

logger = logging.getLogger(__name__)

ENV_ID_PATTERN = re.compile(
    r"^(?P<namespace>[A-Za-z0-9_.-]+)/(?P<name>[A-Za-z0-9_.-]+?)-v(?P<version>\d+)"
    r"(?P<variant>-[A-Za-z0-9_.-]+)?$"
)
CLASS_PATH_PATTERN = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class EnvSpec(BaseModel):
    """A registered env: what ``agentsgym list-envs`` shows and ``make`` builds."""

    model_config = ConfigDict(frozen=True)

    id: str
    entry_point: str = Field(
        description="'package.module:Class' of the env, or the URL of a server that serves it"
    )
    description: str = ""
    default_env_config: dict[str, Any] = Field(default_factory=dict)
    default_agent: str | None = None
    distribution: str | None = None
    version: str | None = None
    plugin: str | None = None

    @property
    def namespace(self) -> str:
        return self.id.split("/", 1)[0] if "/" in self.id else ""

    @property
    def is_remote(self) -> bool:
        """The env is played on a server (its entry point is a URL)."""
        return is_remote_url(self.entry_point)

    def load_class(self) -> type[MultistepEnv]:
        if self.is_remote:
            protocol, _ = split_protocol(self.entry_point)
            if protocol == "agentgym":
                return import_env_class("agentsgym.serve.agentgym_env:AgentGymEnv")
            return import_env_class("agentsgym.serve.remote_env:RemoteEnv")
        return import_env_class(self.entry_point)


class ComponentSpec(BaseModel):
    """A registered agent or trainer adapter."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    factory: Any = Field(description="callable or 'package.module:callable'")
    description: str = ""
    distribution: str | None = None
    plugin: str | None = None

    def build(self, **options: Any) -> Any:
        factory = self.factory
        if isinstance(factory, str):
            factory = import_object(factory)
        return factory(**options)


class RegisterEnv(Protocol):
    def __call__(
        self,
        env_id: str,
        entry_point: str,
        *,
        description: str = "",
        default_agent: str | None = None,
        **default_env_config: Any,
    ) -> None: ...


class RegisterAgent(Protocol):
    def __call__(self, name: str, factory: Any, *, description: str = "") -> None: ...


RegisterTrainer = RegisterAgent


def import_object(path: str) -> Any:
    """Import ``package.module:attribute``."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ValueError(f"{path!r} is not of the form 'package.module:attribute'")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ImportError(f"module {module_name!r} has no attribute {attr!r}") from None


def import_env_class(path: str) -> type[MultistepEnv]:
    from agentsgym.env import MultistepEnv

    cls = import_object(path)
    if not (isinstance(cls, type) and issubclass(cls, MultistepEnv)):
        raise RegistrationError(f"{path!r} is not a subclass of agentsgym.MultistepEnv")
    return cls


def validate_env_id(env_id: str) -> None:
    if not ENV_ID_PATTERN.match(env_id):
        raise RegistrationError(
            f"env id {env_id!r} is not of the form 'namespace/Name-vN' "
            "(optionally followed by '-variant'), e.g. 'twentyq/TwentyQuestions-v0'"
        )


def class_paths_allowed_from_environ() -> bool | tuple[str, ...]:
    """``AGENTSGYM_ALLOW_CLASS_PATHS``: ``1`` allows any, ``pkg.,other.`` prefixes."""
    raw = os.environ.get("AGENTSGYM_ALLOW_CLASS_PATHS", "").strip()
    if raw.lower() in {"", "0", "false", "no", "off"}:
        return False
    if raw.lower() in {"1", "true", "yes", "on", "*"}:
        return True
    return tuple(p.strip() for p in raw.split(",") if p.strip())


class Registry:
    """Envs, agents and trainers registered by the loaded plugins."""

    def __init__(self, host: PluginHost) -> None:
        self.host = host
        self.envs: dict[str, EnvSpec] = {}
        self.agents: dict[str, ComponentSpec] = {}
        self.trainers: dict[str, ComponentSpec] = {}
        for info in host.plugins:
            if info.ok:
                self._collect(info)

    # ---------------------------------------------------------------- collection
    def _collect(self, info: PluginInfo) -> None:
        plugin = info.module
        try:
            for hook_name, register in (
                ("register_envs", self._env_registrar(info)),
                ("register_agents", self._component_registrar(info, self.agents, "agent")),
                ("register_trainers", self._component_registrar(info, self.trainers, "trainer")),
            ):
                impl = getattr(plugin, hook_name, None)
                if impl is not None and hook_name in info.hooks:
                    impl(register=register)
        except RegistrationError:
            # A clash or a malformed id is the user's to resolve: always loud.
            raise
        except Exception as exc:
            self.host.record_failure(info, exc)

    def _env_registrar(self, info: PluginInfo) -> RegisterEnv:
        def register(
            env_id: str,
            entry_point: str,
            *,
            description: str = "",
            default_agent: str | None = None,
            **default_env_config: Any,
        ) -> None:
            validate_env_id(env_id)
            if is_remote_url(entry_point):
                try:
                    split_protocol(entry_point)
                except ValueError as exc:
                    raise RegistrationError(
                        f"{info.distribution or info.name} registers {env_id!r} at {exc}"
                    ) from None
            elif not CLASS_PATH_PATTERN.match(entry_point):
                raise RegistrationError(
                    f"{info.distribution or info.name} registers {env_id!r} with entry point "
                    f"{entry_point!r}; expected 'package.module:Class' or a server URL"
                )
            existing = self.envs.get(env_id)
            if existing is not None:
                raise RegistrationError(
                    f"env id {env_id!r} is registered twice: by {existing.distribution!r} "
                    f"(plugin {existing.plugin!r}) and by {info.distribution!r} (plugin "
                    f"{info.name!r}). Uninstall one, or block one with "
                    f"AGENTSGYM_BLOCK_PLUGINS={info.name}."
                )
            self.envs[env_id] = EnvSpec(
                id=env_id,
                entry_point=entry_point,
                description=description,
                default_env_config=default_env_config,
                default_agent=default_agent,
                distribution=info.distribution,
                version=info.version,
                plugin=info.name,
            )

        return register

    @staticmethod
    def _component_registrar(
        info: PluginInfo, table: dict[str, ComponentSpec], kind: str
    ) -> RegisterAgent:
        def register(name: str, factory: Any, *, description: str = "") -> None:
            existing = table.get(name)
            if existing is not None:
                raise RegistrationError(
                    f"{kind} {name!r} is registered twice: by {existing.distribution!r} and "
                    f"by {info.distribution!r}. Uninstall or block one of them."
                )
            table[name] = ComponentSpec(
                name=name,
                factory=factory,
                description=description,
                distribution=info.distribution,
                plugin=info.name,
            )

        return register

    # ---------------------------------------------------------------- lookups
    def resolve(
        self,
        env_class_path: str,
        *,
        allow_class_paths: bool | Sequence[str] | None = None,
        allow_remote: bool | Sequence[str] | None = None,
    ) -> EnvSpec:
        """The spec of a registered id, of an allowed ``module:Class`` path, or of an
        allowed env server URL."""
        spec = self.envs.get(env_class_path)
        if spec is not None:
            return spec
        if CLASS_PATH_PATTERN.match(env_class_path):
            return self._resolve_class_path(env_class_path, allow_class_paths)
        if is_remote_url(env_class_path):
            return self._resolve_remote(env_class_path, allow_remote)
        raise UnknownEnvError(self._unknown_env_message(env_class_path))

    @staticmethod
    def _resolve_remote(url: str, allow: bool | Sequence[str] | None) -> EnvSpec:
        if allow is None:
            allow = remote_envs_allowed_from_environ()
        try:
            protocol, base = split_protocol(url)
        except ValueError as exc:
            raise UnknownEnvError(str(exc)) from None
        if not url_allowed(url, allow):
            raise UntrustedRemoteEnvError(
                f"env_class_path {url!r} is an env server URL, and playing on servers named "
                "by a dataset is disabled: the server writes the observations and rewards, "
                "and this machine would connect wherever a row points. Allow it with "
                "allow_remote=True or a list of URL prefixes (CLI: --allow-remote-envs; "
                "environment: AGENTSGYM_ALLOW_REMOTE_ENVS=1 or a comma-separated list of "
                "URL prefixes such as http://10.0.0.5:8000)."
            )
        location = f"agentgym+{base}" if protocol == "agentgym" else base
        return EnvSpec(id=location, entry_point=location, description="(env server)")

    def _resolve_class_path(
        self, path: str, allow: bool | Sequence[str] | None
    ) -> EnvSpec:
        if allow is None:
            allow = class_paths_allowed_from_environ()
        module = path.partition(":")[0]
        allowed = allow is True or (
            not isinstance(allow, bool) and any(module.startswith(p) for p in allow)
        )
        if not allowed:
            raise UntrustedClassPathError(
                f"env_class_path {path!r} is a class path, not a registered env id, and "
                "importing arbitrary modules named by a dataset is disabled. Register the "
                "env in a plugin, or allow it with allow_class_paths=True (CLI: "
                "--allow-class-paths; environment: AGENTSGYM_ALLOW_CLASS_PATHS=1 or a "
                "comma-separated list of module prefixes)."
            )
        import_env_class(path)
        return EnvSpec(id=path, entry_point=path, description="(class path)")

    def _unknown_env_message(self, env_id: str) -> str:
        known = sorted(self.envs)
        close = difflib.get_close_matches(env_id, known, n=3, cutoff=0.5)
        namespace = env_id.split("/", 1)[0] if "/" in env_id else None
        providers = sorted(
            {s.distribution or "?" for s in self.envs.values() if s.namespace == namespace}
        )
        parts = [f"no env registered with id {env_id!r}."]
        if close:
            parts.append(f"Did you mean: {', '.join(close)}?")
        if namespace and providers:
            parts.append(f"Namespace {namespace!r} is provided by {', '.join(providers)}.")
        elif namespace:
            namespaces = sorted({s.namespace for s in self.envs.values()})
            parts.append(
                f"No installed package provides namespace {namespace!r} (installed: "
                f"{', '.join(namespaces) or 'none'}); install the package that does."
            )
        failed = [p for p in self.host.plugins if not p.ok]
        if failed:
            parts.append(
                "Plugins that failed to load: "
                + "; ".join(f"{p.name} ({p.distribution}): {p.error}" for p in failed)
            )
        parts.append("Run `agentsgym list-envs` to see every env.")
        return " ".join(parts)

    def agent(self, name: str) -> ComponentSpec:
        return self._component(self.agents, name, UnknownAgentError, "agent", "list-agents")

    def trainer(self, name: str) -> ComponentSpec:
        return self._component(
            self.trainers, name, UnknownTrainerError, "trainer", "list-trainers"
        )

    @staticmethod
    def _component(
        table: dict[str, ComponentSpec],
        name: str,
        error: type[Exception],
        kind: str,
        command: str,
    ) -> ComponentSpec:
        spec = table.get(name)
        if spec is not None:
            return spec
        close = difflib.get_close_matches(name, sorted(table), n=3, cutoff=0.5)
        # Names are often namespaced ("agentsgym/bisect"); a user types the short part.
        short = {known.rsplit("/", 1)[-1]: known for known in table}
        typed = name.rsplit("/", 1)[-1]
        for match in difflib.get_close_matches(typed, sorted(short), n=3, cutoff=0.6):
            if short[match] not in close:
                close.append(short[match])
        hint = f" Did you mean: {', '.join(close[:3])}?" if close else ""
        raise error(
            f"no {kind} registered with name {name!r}.{hint} "
            f"Run `agentsgym {command}` to see them all."
        )


_lock = threading.Lock()
_registry: Registry | None = None


def get_registry() -> Registry:
    """The process-wide registry, built on first use."""
    global _registry
    with _lock:
        host = load_plugins()
        if _registry is None or _registry.host is not host:
            _registry = Registry(host)
        return _registry


def reset_registry() -> None:
    """Forget plugins and registrations (tests; after installing a plugin live)."""
    global _registry
    from agentsgym.plugins import reset_plugins

    with _lock:
        _registry = None
    reset_plugins()


def resolve(
    env_class_path: str,
    *,
    allow_class_paths: bool | Sequence[str] | None = None,
    allow_remote: bool | Sequence[str] | None = None,
) -> EnvSpec:
    """Resolve a registered env id, an allowed ``module:Class`` path or an allowed env
    server URL to its spec."""
    return get_registry().resolve(
        env_class_path, allow_class_paths=allow_class_paths, allow_remote=allow_remote
    )


def make_agent(name: str, **options: Any) -> Any:
    """Build a registered agent by name with the given options."""
    return get_registry().agent(name).build(**options)


def make_trainer(name: str, **options: Any) -> Any:
    """Build a registered trainer adapter by name with the given options."""
    return get_registry().trainer(name).build(**options)

