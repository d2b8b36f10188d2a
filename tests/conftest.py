"""Shared fixtures of the core tests."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tokenizer_packs import load_pack

# Tests never reach a model or dataset hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


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
def torch_single_thread() -> Any:
    """One intra-op torch thread for a module's model tests (restored afterwards)."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A folder on sys.path for fake distributions; their modules are forgotten after."""
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    yield root
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", "") or "").startswith(str(root)):
            del sys.modules[name]
