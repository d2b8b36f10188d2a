"""The registry: env ids, agents, trainers, executors and env sources of the plugins,
built on first use by calling the ``register_*`` hooks through pluggy, each plugin with a
``register`` callback that knows which distribution registers (so a clash names both)."""

from __future__ import annotations

import difflib
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agentsgym import trust
from agentsgym.config import describe_validation_error
from agentsgym.errors import (
    RegistrationError,
    UnknownAgentError,
    UnknownEnvError,
    UnknownExecutorError,
    UnknownModelError,
    UnknownTrainerError,
    UntrustedClassPathError,
    UntrustedRemoteEnvError,
)
from agentsgym.hookspecs import (
    RegisterAgent,
    RegisterEnv,
    RegisterEnvSource,
    RegisterExecutor,
    RegisterTrainer,
)
from agentsgym.install_hint import not_installed_hint
from agentsgym.plugins import PluginHost, PluginInfo, load_plugins, reset_plugins
from agentsgym.specs import (
    ComponentSpec,
    EnvSourceSpec,
    EnvSpec,
    ExecutorFlag,
    import_object,
    url_scheme,
)

if TYPE_CHECKING:
    from agentsgym.env import MultistepEnv

__all__ = [
    "CLASS_PATH_PATTERN",
    "ENV_ID_PATTERN",
    "ComponentSpec",
    "EnvSourceSpec",
    "EnvSpec",
    "RegisterAgent",
    "RegisterEnv",
    "RegisterEnvSource",
    "RegisterExecutor",
    "RegisterTrainer",
    "Registry",
    "env_class",
    "get_registry",
    "import_env_class",
    "import_object",
    "make_agent",
    "make_trainer",
    "model_folder",
    "reset_registry",
    "resolve",
    "validate_env_id",
]

ENV_ID_PATTERN = re.compile(
    r"^(?P<namespace>[A-Za-z0-9_.-]+)/(?P<name>[A-Za-z0-9_.-]+?)-v(?P<version>\d+)"
    r"(?P<variant>-[A-Za-z0-9_.-]+)?$"
)
CLASS_PATH_PATTERN = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
# kind of component -> (the hook that registers it, the error for an unknown name)
COMPONENT_KINDS: dict[str, tuple[str, type[Exception]]] = {
    "agent": ("register_agents", UnknownAgentError),
    "trainer": ("register_trainers", UnknownTrainerError),
    "executor": ("register_executors", UnknownExecutorError),
    "model": ("register_models", UnknownModelError),
}


def import_env_class(path: str) -> type[MultistepEnv]:
    """Import ``package.module:Class`` and check that it is an env class."""
    from agentsgym.env import MultistepEnv

    cls = import_object(path)
    if not (isinstance(cls, type) and issubclass(cls, MultistepEnv)):
        raise RegistrationError(f"{path!r} is not a subclass of agentsgym.MultistepEnv")
    return cls


def env_class(spec: EnvSpec) -> type[MultistepEnv]:
    """The class ``spec`` builds. An env played through an env source (a URL) is of the
    source's class, known once built; its spec answers with :class:`MultistepEnv`."""
    if spec.is_remote:
        from agentsgym.env import MultistepEnv

        return MultistepEnv
    return import_env_class(spec.entry_point)


def validate_env_id(env_id: str) -> None:
    if not ENV_ID_PATTERN.match(env_id):
        raise RegistrationError(
            f"env id {env_id!r} is not of the form 'namespace/Name-vN' "
            "(optionally followed by '-variant'), e.g. 'twentyq/TwentyQuestions-v0'"
        )


class Registry:
    """Everything the loaded plugins registered, by kind."""

    def __init__(self, host: PluginHost) -> None:
        self.host = host
        self.envs: dict[str, EnvSpec] = {}
        self.env_sources: dict[str, EnvSourceSpec] = {}
        self.components: dict[str, dict[str, ComponentSpec]] = {k: {} for k in COMPONENT_KINDS}
        self.agents = self.components["agent"]
        self.trainers = self.components["trainer"]
        self.executors = self.components["executor"]
        registrars: dict[str, Callable[[PluginInfo], Callable[..., None]]] = {
            "register_envs": lambda info: partial(self._add_env, info),
            "register_env_sources": lambda info: partial(self._add_env_source, info),
        }
        for kind, (hook_name, _) in COMPONENT_KINDS.items():
            registrars[hook_name] = partial(self._component_registrar, kind)
        for hook_name, registrar in registrars.items():
            # A clash or a malformed id is the user's to fix: always loud.
            host.call_each(
                hook_name,
                lambda info, registrar=registrar: {"register": registrar(info)},
                reraise=(RegistrationError,),
            )

    # ---------------------------------------------------------------- collection
    def _component_registrar(self, kind: str, info: PluginInfo) -> Callable[..., None]:
        return partial(self._add_component, info, kind)

    @staticmethod
    def _refuse_clash(kind: str, name: str, existing: Any, info: PluginInfo) -> None:
        if existing is None:
            return
        # Named in a fixed order: which of the two registered first is pluggy's call order.
        both = sorted(
            [(existing.distribution or "?", existing.plugin), (info.distribution or "?", info.name)]
        )
        (first, first_plugin), (second, second_plugin) = both
        raise RegistrationError(
            f"{kind} {name!r} is registered twice: by {first!r} (plugin {first_plugin!r}) and "
            f"by {second!r} (plugin {second_plugin!r}). Uninstall one, or block one with "
            f"AGENTSGYM_BLOCK_PLUGINS={info.name}."
        )

    # The ``register`` callbacks (hookspecs.RegisterEnv...), bound to the plugin.
    def _add_env(
        self,
        info: PluginInfo,
        /,
        env_id: str,
        entry_point: str,
        *,
        description: str = "",
        default_agent: str | None = None,
        **default_env_config: Any,
    ) -> None:
        validate_env_id(env_id)
        if url_scheme(entry_point) is None and not CLASS_PATH_PATTERN.match(entry_point):
            raise RegistrationError(
                f"{info.distribution or info.name} registers {env_id!r} with entry point "
                f"{entry_point!r}; expected 'package.module:Class' or a server URL"
            )
        self._refuse_clash("env id", env_id, self.envs.get(env_id), info)
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

    def _add_component(
        self,
        info: PluginInfo,
        kind: str,
        /,
        name: str,
        factory: Any,
        *,
        description: str = "",
        flags: Sequence[ExecutorFlag | Mapping[str, Any]] = (),
    ) -> None:
        who = info.distribution or info.name
        if flags and kind != "executor":
            raise RegistrationError(
                f"{who} registers the {kind} {name!r} with flags; only executors declare "
                "command-line flags (agents and trainers take --agent-option/--trainer-option)"
            )
        try:
            declared = tuple(ExecutorFlag.model_validate(flag) for flag in flags)
        except ValidationError as exc:
            raise RegistrationError(
                f"{who} registers the executor {name!r} with a bad flag: "
                f"{describe_validation_error(exc, 'flag')} A flag is "
                "ExecutorFlag(flag='--lower-case', option='keyword_of_the_factory', help=...)"
            ) from None
        table = self.components[kind]
        self._refuse_clash(kind, name, table.get(name), info)
        table[name] = ComponentSpec(
            name=name,
            factory=factory,
            description=description,
            distribution=info.distribution,
            plugin=info.name,
            flags=declared,
        )

    def _add_env_source(
        self,
        info: PluginInfo,
        /,
        scheme: str,
        factory: Any,
        *,
        description: str = "",
        normalize: Any = None,
    ) -> None:
        scheme = scheme.lower().removesuffix("://")
        if url_scheme(f"{scheme}://") != scheme:
            raise RegistrationError(
                f"{info.distribution or info.name} registers an env source for {scheme!r}, "
                "which is not a URL scheme (letters, digits, '+', '-', '.')"
            )
        self._refuse_clash("env source", scheme, self.env_sources.get(scheme), info)
        self.env_sources[scheme] = EnvSourceSpec(
            name=scheme,
            factory=factory,
            description=description,
            normalize=normalize,
            distribution=info.distribution,
            plugin=info.name,
        )

    # ---------------------------------------------------------------- envs
    def resolve(
        self,
        env_class_path: str,
        *,
        allow_class_paths: bool | Sequence[str] | None = None,
        allow_remote: bool | Sequence[str] | None = None,
    ) -> EnvSpec:
        """The spec of a registered id, an allowed ``module:Class`` path or env URL."""
        spec = self.envs.get(env_class_path)
        if spec is not None:
            return spec
        if CLASS_PATH_PATTERN.match(env_class_path):
            return self._resolve_class_path(env_class_path, allow_class_paths)
        if url_scheme(env_class_path) is not None:
            return self._resolve_url(env_class_path, allow_remote)
        raise UnknownEnvError(self._unknown_env_message(env_class_path))

    def env_source(self, url: str) -> EnvSourceSpec:
        """The env source that plays ``url``, by its scheme."""
        scheme = url_scheme(url) or ""
        source = self.env_sources.get(scheme)
        if source is None:
            known = ", ".join(f"{s}://" for s in sorted(self.env_sources)) or "none"
            raise UnknownEnvError(
                f"no installed plugin plays {scheme}:// env URLs such as {url!r} (env sources: "
                f"{known}).{not_installed_hint('env source')}"
            )
        return source

    def _resolve_url(self, url: str, allow: bool | Sequence[str] | None) -> EnvSpec:
        source = self.env_source(url)
        try:
            location = source.canonical(url)
        except ValueError as exc:
            raise UnknownEnvError(str(exc)) from None
        if allow is None:
            allow = trust.remote_envs_allowed_from_environ()
        if not trust.url_allowed(location, allow):
            raise UntrustedRemoteEnvError(
                f"env_class_path {url!r} is an env server URL, and playing on servers named "
                "by a dataset is disabled: the server writes the observations and rewards, "
                "and this machine would connect wherever a row points. Allow it with "
                "allow_remote=True or a list of URL prefixes (CLI: --allow-remote-envs; "
                "environment: AGENTSGYM_ALLOW_REMOTE_ENVS=1 or a comma-separated list of "
                "URL prefixes such as http://10.0.0.5:8000)."
            )
        return EnvSpec(id=location, entry_point=location, description="(env server)")

    def _resolve_class_path(self, path: str, allow: bool | Sequence[str] | None) -> EnvSpec:
        if allow is None:
            allow = trust.class_paths_allowed_from_environ()
        if not trust.module_allowed(path.partition(":")[0], allow):
            raise UntrustedClassPathError(
                f"env_class_path {path!r} is a class path, not a registered env id, and "
                "importing arbitrary modules named by a dataset is disabled. Register the "
                "env in a plugin, or allow it with allow_class_paths=True (CLI: "
                "--allow-class-paths; environment: AGENTSGYM_ALLOW_CLASS_PATHS=1 or a "
                "comma-separated list of modules)."
            )
        import_env_class(path)
        return EnvSpec(id=path, entry_point=path, description="(class path)")

    def _unknown_env_message(self, env_id: str) -> str:
        parts = [f"no env registered with id {env_id!r}."]
        close = difflib.get_close_matches(env_id, sorted(self.envs), n=3, cutoff=0.5)
        if close:
            parts.append(f"Did you mean: {', '.join(close)}?")
        namespace = env_id.split("/", 1)[0] if "/" in env_id else None
        specs = self.envs.values()
        providers = sorted({s.distribution or "?" for s in specs if s.namespace == namespace})
        if namespace and providers:
            parts.append(f"Namespace {namespace!r} is provided by {', '.join(providers)}.")
        elif namespace:
            namespaces = ", ".join(sorted({s.namespace for s in specs})) or "none"
            parts.append(
                f"No installed package provides namespace {namespace!r} (installed: "
                f"{namespaces}); install the package that does."
            )
        failed = [f"{p.name} ({p.distribution}): {p.error}" for p in self.host.plugins if not p.ok]
        if failed:
            parts.append(f"Plugins that failed to load: {'; '.join(failed)}")
        parts.append("Run `agentsgym list-envs` to see every env.")
        return " ".join(parts)

    # ---------------------------------------------------------------- components
    def agent(self, name: str) -> ComponentSpec:
        return self.component("agent", name)

    def trainer(self, name: str) -> ComponentSpec:
        return self.component("trainer", name)

    def executor(self, name: str) -> ComponentSpec:
        return self.component("executor", name)

    def component(self, kind: str, name: str) -> ComponentSpec:
        """The registered ``kind`` called ``name``, or an error naming the closest ones."""
        table = self.components[kind]
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
        if close:
            hint = f" Did you mean: {', '.join(close[:3])}?"
        else:
            hint = not_installed_hint(kind)
        raise COMPONENT_KINDS[kind][1](
            f"no {kind} registered with name {name!r}.{hint} "
            f"Run `agentsgym list-{kind}s` to see them all."
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
    with _lock:
        _registry = None
    reset_plugins()


def resolve(
    env_class_path: str,
    *,
    allow_class_paths: bool | Sequence[str] | None = None,
    allow_remote: bool | Sequence[str] | None = None,
) -> EnvSpec:
    """The spec of a registered env id, an allowed ``module:Class`` path or env URL."""
    return get_registry().resolve(
        env_class_path, allow_class_paths=allow_class_paths, allow_remote=allow_remote
    )


def make_agent(name: str, **options: Any) -> Any:
    """Build a registered agent by name with the given options."""
    return get_registry().agent(name).build(**options)


def make_trainer(name: str, **options: Any) -> Any:
    """Build a registered trainer adapter by name with the given options."""
    return get_registry().trainer(name).build(**options)


def model_folder(name: str) -> str | None:
    """The local folder of a registered model name (``register_models``), else None."""
    spec = get_registry().components["model"].get(name)
    return None if spec is None else str(spec.build())
