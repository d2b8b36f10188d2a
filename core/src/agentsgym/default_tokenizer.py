"""The bundled tokenizer: a small byte-level BPE with a ChatML chat template, built by
``scripts/build_default_tokenizer.py`` and shipped in the package, so that the main
job and the tests run offline with no model download."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any


@lru_cache(maxsize=1)
def load_default_tokenizer() -> Any:
    """Load (once per process) the bundled tokenizer with transformers."""
    from transformers import AutoTokenizer

    path = resources.files("agentsgym") / "assets" / "tiny-chatml"
    return AutoTokenizer.from_pretrained(str(path))
