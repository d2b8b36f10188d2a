"""Shared fixtures: envs built through the registry, and the real tokenizer packs."""

from __future__ import annotations

from typing import Any

import pytest

from tokenizer_packs import load_pack
from twentyq_testutil import BASIC, HARDCORE


@pytest.fixture(scope="session")
def qwen_tokenizer() -> Any:
    return load_pack("qwen2.5-1.5b-instruct")


@pytest.fixture
def basic_env() -> Any:
    import agentsgym

    return agentsgym.make(BASIC)


@pytest.fixture
def hardcore_env() -> Any:
    import agentsgym

    return agentsgym.make(HARDCORE)
