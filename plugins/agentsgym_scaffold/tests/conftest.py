"""Fixtures of the agentsgym-scaffold tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _fresh_registry(agentsgym_fresh_registry: None) -> Iterator[None]:
    """Every test sees plugins loaded from scratch (and leaves none behind)."""
    yield
