"""Fixtures of the agentsgym-trl tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tokenizer_packs import load_pack


@pytest.fixture(scope="session")
def qwen25() -> Any:
    return load_pack("qwen2.5-1.5b-instruct")


@pytest.fixture(scope="session")
def llama3() -> Any:
    return load_pack("llama-3.2-instruct")


@pytest.fixture(scope="session")
def qwen3() -> Any:
    return load_pack("qwen3-4b")


@pytest.fixture(scope="module")
def torch_single_thread() -> Iterator[None]:
    """One intra-op torch thread for a module's model tests (restored afterwards): on a
    shared 2-core machine, torch's own threads only fight the test's."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
