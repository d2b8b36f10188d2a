"""The bundled tokenizer: a small byte-level BPE with a ChatML chat template.

It is built by ``scripts/build_default_tokenizer.py`` and shipped in the package,
so the main job and the tests run offline with no model download.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any


def default_tokenizer_path() -> str:
    return str(resources.files("agentsgym") / "assets" / "tiny-chatml")


@lru_cache(maxsize=1)
def load_default_tokenizer() -> Any:
    """Load (once per process) the bundled tokenizer with transformers."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(default_tokenizer_path())
