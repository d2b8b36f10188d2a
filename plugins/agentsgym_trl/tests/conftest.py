"""Fixtures of the agentsgym-trl tests."""

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


def _pack(name: str) -> Any:
    path = SHARED_TOKENIZERS / name
    if not (path / "tokenizer.json").exists():
        pytest.skip(f"tokenizer pack {name} not found at {path} (../shared/tokenizers is absent)")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))


@pytest.fixture(scope="session")
def qwen25() -> Any:
    return _pack("qwen2.5-1.5b-instruct")


@pytest.fixture(scope="session")
def llama3() -> Any:
    return _pack("llama-3.2-instruct")


@pytest.fixture(scope="session")
def qwen3() -> Any:
    return _pack("qwen3-4b")


@pytest.fixture(scope="module")
def torch_single_thread() -> Iterator[None]:
    """One intra-op torch thread for a module's model tests (restored afterwards): on a
    shared 2-core machine, torch's own threads only fight the test's."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
