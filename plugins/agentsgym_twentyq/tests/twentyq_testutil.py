"""Constants shared by the tests (a uniquely named module, unlike conftest)."""

from __future__ import annotations

from pathlib import Path

# The repository sits at <root>/main; tokenizer packs live beside it in <root>/shared.
REPO_ROOT = Path(__file__).resolve().parents[3]
TOKENIZERS = REPO_ROOT / ".." / "shared" / "tokenizers"
QWEN = TOKENIZERS / "qwen2.5-1.5b-instruct"

BASIC = "twentyq/TwentyQuestions-v0"
HARDCORE = "twentyq/TwentyQuestions-v0-hardcore"
