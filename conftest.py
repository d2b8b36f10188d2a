"""What a run of the whole workspace shares (each distribution's tests/conftest.py adds
its own fixtures).

No test writes into the working directory: a clone's root may hold a user's own
``rollouts.parquet`` (the README's first command writes it there), and a command run
with its default output (``rollout``'s ``rollouts.parquet``, ``train``'s
``agentsgym-train``, an example database of a property test) would collide with it or
leave files behind. Every test runs in its own ``tmp_path`` (``agentsgym_tmp_cwd``,
named in each ``[tool.pytest.ini_options]``); what a module- or session-scoped fixture
writes before a test starts is not moved there, so a run of the workspace also checks
that the folder it was started in gained nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def working_directory_left_as_it_was() -> Iterator[None]:
    """Fails the session if any test (or fixture) left a new entry in the folder pytest
    was started in."""
    where = Path.cwd()
    before = set(os.listdir(where))
    yield
    added = sorted(set(os.listdir(where)) - before)
    assert not added, f"tests wrote {added} into the working directory {where}: use tmp_path"
