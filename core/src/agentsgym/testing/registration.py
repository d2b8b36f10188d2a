"""Test envs and plugins without a package: register_env registers an env class for a
test; install_plugin installs a plugin module as a distribution, for tests of discovery."""

from __future__ import annotations

import inspect
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentsgym.errors import RegistrationError
from agentsgym.registry import EnvSpec, get_registry, import_env_class, validate_env_id

if TYPE_CHECKING:
    from agentsgym.env import MultistepEnv

__all__ = ["install_plugin", "register_env"]


@contextmanager
def register_env(
    env_id: str, env_class: type[MultistepEnv] | str, *, description: str = "",
    default_agent: str | None = None, **default_env_config: Any,
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
        id=env_id, entry_point=entry_point, description=description, default_agent=default_agent,
        default_env_config=default_env_config, distribution=None, plugin="agentsgym.testing",
    )
    import_env_class(spec.entry_point)
    registry.envs[env_id] = spec
    try:
        yield spec
    finally:
        registry.envs.pop(env_id, None)


def install_plugin(
    site: Path, distribution: str, module: str, source: str, *,
    entry_point: str | None = None, version: str = "1.0",
) -> Path:
    """Write ``module.py`` (``{module}`` in ``source`` becomes its name) and an
    installed-looking ``dist-info`` with the ``agentsgym`` entry point ``entry_point``
    (default: ``module``) into ``site``; return the module file.

    With ``site`` on ``sys.path`` (``monkeypatch.syspath_prepend``) importlib.metadata
    finds it like a pip-installed distribution, so the discovery under test is the real
    one; reset the registry (``agentsgym_fresh_registry``) before using it.
    """
    site.mkdir(parents=True, exist_ok=True)
    path = site / f"{module}.py"
    path.write_text(textwrap.dedent(source).replace("{module}", module))
    info = site / f"{distribution.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    metadata = f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n"
    (info / "METADATA").write_text(metadata)
    (info / "entry_points.txt").write_text(f"[agentsgym]\n{entry_point or module} = {module}\n")
    return path
