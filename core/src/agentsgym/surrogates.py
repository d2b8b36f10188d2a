"""Repair of surrogate code points (U+D800..U+DFFF): text that UTF-8 cannot encode.

A model server that split an emoji's UTF-16 pair, or JSON with a stray ``\\ud83d``,
makes such text, and tokenizers, JSON lines and parquet each fail on it in their own
way; so the runner repairs text where it enters (agent replies, env messages).
"""

from __future__ import annotations

import math
from typing import Any


def has_lone_surrogates(text: str) -> bool:
    """Whether ``text`` holds a surrogate code point (UTF-8 cannot encode it)."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def repair_text(text: str) -> tuple[str, int]:
    """``text`` with surrogate pairs joined and lone ones made U+FFFD, and how many
    surrogate code points it held (0: ``text`` is returned as it is)."""
    if not has_lone_surrogates(text):
        return text, 0
    count = sum(1 for ch in text if "\ud800" <= ch <= "\udfff")
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace"), count


def repair_value(value: Any) -> Any:
    """A JSON-like value made writable as JSON lines: strings (dict keys too) repaired,
    non-finite floats as None; containers are copied, other values returned as they are.
    """
    if isinstance(value, str):
        return repair_text(value)[0]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {
            (repair_text(k)[0] if isinstance(k, str) else k): repair_value(v)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [repair_value(v) for v in value]
    return value
