"""Shared fixtures of the core tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

SHARED_TOKENIZERS = Path(__file__).resolve().parents[1].parent / "shared" / "tokenizers"
LLAMA_KWARGS = {"date_string": "26 Jul 2024"}


def load_pack(name: str) -> Any:
    """A real tokenizer pack from ../shared/tokenizers, or skip the test."""
    path = SHARED_TOKENIZERS / name
    if not (path / "tokenizer.json").exists():
        pytest.skip(f"tokenizer pack {name} not found at {path} (../shared/tokenizers is absent)")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))


@pytest.fixture(scope="session")
def qwen25() -> Any:
    return load_pack("qwen2.5-1.5b-instruct")


@pytest.fixture(scope="session")
def llama3() -> Any:
    return load_pack("llama-3.2-instruct")


@pytest.fixture(scope="session")
def qwen3() -> Any:
    return load_pack("qwen3-4b")


@pytest.fixture(autouse=True)
def _fresh_registry() -> Any:
    """Every test sees plugins loaded from scratch (and leaves none behind)."""
    from agentsgym.registry import reset_registry

    reset_registry()
    yield
    reset_registry()
