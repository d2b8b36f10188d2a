"""pytest plugin for env authors (auto-loaded when agentsgym is installed).

Fixtures:

* ``agentsgym_tokenizer``: the bundled offline tokenizer (ChatML template).
* ``agentsgym_check_env``: :func:`agentsgym.testing.check_env`.
* ``agentsgym_register_env``: ``register(env_id, EnvClass, **spec)`` registers an env
  class for the test (no package needed), e.g. to run ``check_env`` on a variant
  or to test a wrapper plugin; the registration is removed afterwards.
* ``agentsgym_fresh_registry``: forgets loaded plugins before and after the test,
  for tests that install, block or break plugins.

Disable it with ``-p no:agentsgym`` like any pytest plugin.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest


@pytest.fixture(scope="session")
def agentsgym_tokenizer() -> Any:
    from agentsgym.default_tokenizer import load_default_tokenizer

    return load_default_tokenizer()


@pytest.fixture
def agentsgym_check_env() -> Callable[..., Any]:
    from agentsgym.testing import check_env

    return check_env


@pytest.fixture
def agentsgym_register_env() -> Iterator[Callable[..., Any]]:
    from agentsgym.testing import register_env

    with ExitStack() as stack:

        def register(env_id: str, env_class: Any, **spec: Any) -> Any:
            return stack.enter_context(register_env(env_id, env_class, **spec))

        yield register


@pytest.fixture
def agentsgym_fresh_registry() -> Iterator[None]:
    from agentsgym.registry import reset_registry

    reset_registry()
    yield
    reset_registry()
