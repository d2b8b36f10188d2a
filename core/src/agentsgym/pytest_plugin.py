"""pytest fixtures for env authors, auto-loaded when agentsgym is installed (disable
with ``-p no:agentsgym``). They import agentsgym lazily: the plugin loads in every test
run of an environment that has agentsgym, most of which never use it."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest


@pytest.fixture(scope="session")
def agentsgym_tokenizer() -> Any:
    """The bundled offline tokenizer (ChatML template)."""
    from agentsgym.default_tokenizer import load_default_tokenizer

    return load_default_tokenizer()


@pytest.fixture
def agentsgym_check_env() -> Callable[..., Any]:
    """:func:`agentsgym.testing.check_env`."""
    from agentsgym.testing import check_env

    return check_env


@pytest.fixture
def agentsgym_register_env() -> Iterator[Callable[..., Any]]:
    """``register(env_id, EnvClass, **spec)``: an env class registered until the test ends."""
    from agentsgym.testing import register_env

    with ExitStack() as stack:

        def register(env_id: str, env_class: Any, **spec: Any) -> Any:
            return stack.enter_context(register_env(env_id, env_class, **spec))

        yield register


@pytest.fixture
def agentsgym_fresh_registry() -> Iterator[None]:
    """Forgets loaded plugins before and after the test (tests that install or break plugins)."""
    from agentsgym.registry import reset_registry

    reset_registry()
    yield
    reset_registry()


@pytest.fixture
def agentsgym_tmp_cwd(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs the test in its ``tmp_path`` as working directory: a command's default output
    (``rollout``'s ``rollouts.parquet``, ``train``'s ``agentsgym-train``) lands there,
    never beside a user's own files (name it for every test of a package in
    ``[tool.pytest.ini_options]``: ``usefixtures = ["agentsgym_tmp_cwd"]``). Hypothesis's
    folder moves with it."""
    monkeypatch.chdir(tmp_path)
    configuration = sys.modules.get("hypothesis.configuration")
    if configuration is not None:
        # hypothesis fixed its folder to the working directory it was imported in (the
        # clone's root, at collection) and writes caches there even with database=None
        monkeypatch.setattr(configuration, "__hypothesis_home_directory", tmp_path / ".hypothesis")
