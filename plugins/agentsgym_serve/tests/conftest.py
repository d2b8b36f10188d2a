"""Fixtures of the agentsgym-serve tests."""

from __future__ import annotations

from typing import Any

import pytest

from tokenizer_packs import load_pack


@pytest.fixture(scope="session")
def qwen25() -> Any:
    return load_pack("qwen2.5-1.5b-instruct")
