"""Fixtures of agentsgym-verifiers' tests."""

from __future__ import annotations

import pytest

from verifiers_fixtures import verifiers_python


@pytest.fixture(scope="session")
def verifiers_python_path() -> str:
    """The python of a venv with verifiers 0.4.0 (built once; skips when it cannot be)."""
    return verifiers_python()
