"""Fixtures of the agentsgym-serve tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The real tokenizer packs of this repository's workspace (../shared/tokenizers).
SHARED_TOKENIZERS = Path(__file__).resolve().parents[4] / "shared" / "tokenizers"


@pytest.fixture(autouse=True)
def _fresh_registry(agentsgym_fresh_registry: None) -> Iterator[None]:
    """Every test sees plugins loaded from scratch (and leaves none behind)."""
    yield


@pytest.fixture(scope="session")
def qwen25() -> Any:
    path = SHARED_TOKENIZERS / "qwen2.5-1.5b-instruct"
    if not (path / "tokenizer.json").exists():
        pytest.skip(f"tokenizer pack not found at {path} (../shared/tokenizers is absent)")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))
