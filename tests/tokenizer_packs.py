"""The real tokenizer packs in ../shared/tokenizers, beside the repository: the one place
that knows where they are. Core tests, plugin tests (their pytest ``pythonpath`` names
this folder) and bench/ (which puts this folder on ``sys.path``) all load them here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

SHARED_TOKENIZERS = Path(__file__).resolve().parents[2] / "shared" / "tokenizers"
LLAMA_KWARGS = {"date_string": "26 Jul 2024"}


def pack_path(name: str) -> Path:
    """The folder of a pack (it may be absent: see :func:`has_pack`)."""
    return SHARED_TOKENIZERS / name


def has_pack(name: str) -> bool:
    return (pack_path(name) / "tokenizer.json").is_file()


def load_pack(name: str) -> Any:
    """A real tokenizer pack from ../shared/tokenizers, or skip the test."""
    if not has_pack(name):
        import pytest

        pytest.skip(
            f"tokenizer pack {name} not found at {pack_path(name)} (../shared/tokenizers is absent)"
        )
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(pack_path(name)))
