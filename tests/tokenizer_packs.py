"""The real tokenizer packs in ../shared/tokenizers (skipped when absent)."""

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
