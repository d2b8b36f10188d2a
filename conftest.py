"""What every test of the workspace shares (each distribution's tests/conftest.py adds
its own fixtures).

No test writes into the working directory: a clone's root may hold a user's own
``rollouts.parquet`` (the README's first command writes it there), and a command run
with its default output (``rollout``'s ``rollouts.parquet``, ``train``'s
``agentsgym-train``, an example database of a property test) would collide with it or
leave files behind. Each test runs in an empty folder of its own, its ``tmp_path``;
a file it needs from the repository is found from its own ``__file__``. What a
module- or session-scoped fixture writes before a test starts is not moved there, so
the session also checks that the working directory gained nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def working_directory_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test's working directory is its ``tmp_path`` (see the module docstring)."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="session", autouse=True)
def working_directory_left_as_it_was() -> Iterator[None]:
    """Fails the session if any test (or fixture) left a new entry in the folder pytest
    was started in."""
    where = Path.cwd()
    before = set(os.listdir(where))
    yield
    added = sorted(set(os.listdir(where)) - before)
    assert not added, f"tests wrote {added} into the working directory {where}: write into tmp_path"
