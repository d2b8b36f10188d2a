"""Test envs without a package: register_env registers an env class for a test."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from agentsgym.errors import RegistrationError
from agentsgym.registry import EnvSpec, get_registry, import_env_class, validate_env_id

if TYPE_CHECKING:
    from agentsgym.env import MultistepEnv

__all__ = ["register_env"]


@contextmanager
def register_env(
    env_id: str,
    env_class: type[MultistepEnv] | str,
    *,
    description: str = "",
    default_agent: str | None = None,
    **default_env_config: Any,
) -> Iterator[EnvSpec]:
    """Register ``env_class`` (the class or its ``"package.module:Class"`` path) under
    ``env_id`` for the ``with`` block, e.g. ``with register_env("test/MyEnv-v0", MyEnv):``.

    :raises RegistrationError: the id is malformed or already registered.
    """
    validate_env_id(env_id)
    if isinstance(env_class, str):
        entry_point = env_class
    else:
        if "<locals>" in env_class.__qualname__:
            raise RegistrationError(
                f"{env_class.__qualname__} is defined inside a function; define test envs at "
                "module level so that the registry can import them by path"
            )
        module = env_class.__module__
        if sys.modules.get(module) is None:  # a file imported by path (pytest's importlib mode)
            sys.modules[module] = inspect.getmodule(env_class)  # type: ignore[assignment]
        entry_point = f"{module}:{env_class.__qualname__}"
    registry = get_registry()
    if env_id in registry.envs:
        raise RegistrationError(
            f"env id {env_id!r} is already registered by {registry.envs[env_id].distribution!r}; "
            "pick another id for the test env"
        )
    spec = EnvSpec(
        id=env_id,
        entry_point=entry_point,
        description=description,
        default_agent=default_agent,
        default_env_config=default_env_config,
        distribution=None,
        plugin="agentsgym.testing",
    )
    import_env_class(spec.entry_point)
    registry.envs[env_id] = spec
    try:
        yield spec
    finally:
        registry.envs.pop(env_id, None)
