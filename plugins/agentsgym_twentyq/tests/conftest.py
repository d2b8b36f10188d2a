"""Shared fixtures: envs built through the registry, and the real tokenizer packs."""

from __future__ import annotations

from typing import Any

import pytest

from twentyq_testutil import BASIC, HARDCORE, QWEN


@pytest.fixture(scope="session")
def qwen_tokenizer() -> Any:
    if not (QWEN / "tokenizer.json").is_file():
        pytest.skip(f"real tokenizer pack not found at {QWEN.resolve()} (../shared/tokenizers)")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(QWEN))


@pytest.fixture
def basic_env() -> Any:
    import agentsgym

    return agentsgym.make(BASIC)


@pytest.fixture
def hardcore_env() -> Any:
    import agentsgym

    return agentsgym.make(HARDCORE)
