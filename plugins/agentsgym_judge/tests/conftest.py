"""Fixtures of agentsgym-judge's tests: judge servers on loopback (judge_fixtures.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def judge_server() -> Iterator[Any]:
    """A server whose judge is right on numbers (:func:`exact_judge`)."""
    fixtures = pytest.importorskip("judge_fixtures")
    with fixtures.serve(fixtures.model_server.ScriptedPolicy(fixtures.exact_judge)) as server:
        yield server


@pytest.fixture(scope="module")
def answering_server() -> Iterator[Any]:
    """A server playing both parts of an OpenAnswer episode (:func:`player_and_judge`)."""
    fixtures = pytest.importorskip("judge_fixtures")
    with fixtures.serve(fixtures.model_server.ScriptedPolicy(fixtures.player_and_judge)) as server:
        yield server


@pytest.fixture
def gated() -> Iterator[tuple[Any, Any]]:
    """A server whose requests wait for ``policy.gate`` (opened at teardown)."""
    fixtures = pytest.importorskip("judge_fixtures")
    policy = fixtures.GatedPolicy()
    with fixtures.serve(policy) as server:
        try:
            yield server, policy
        finally:
            policy.gate.set()
