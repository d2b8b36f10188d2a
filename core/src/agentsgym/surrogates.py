"""Repair of lone surrogates: text that Python holds but UTF-8 cannot encode.

A ``str`` may hold surrogate code points (U+D800..U+DFFF) that pair up into nothing,
for instance ``"\\ud800"`` from a model server that split an emoji's UTF-16 pair, or
from JSON with a stray ``\\ud83d`` escape. Everything downstream of the runner
encodes text as UTF-8 (tokenizers, JSON lines, parquet), and each of them fails on
such a string in its own way. The runner therefore repairs text where it enters: the
agent's reply and the env's messages. A valid surrogate *pair* becomes the character
it encodes; a lone surrogate becomes U+FFFD (the replacement character).

This module imports nothing of agentsgym: it sits at the ground of the import tree.
"""

from __future__ import annotations

import math
from typing import Any

REPLACEMENT = "\ufffd"


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
    """``text`` with surrogate pairs joined and lone surrogates replaced by U+FFFD.

    Returns the repaired text and how many surrogate code points it held (0: the text
    was fine and is returned as it is).
    """
    if not has_lone_surrogates(text):
        return text, 0
    count = sum(1 for ch in text if "\ud800" <= ch <= "\udfff")
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace"), count


def repair_value(value: Any) -> Any:
    """A JSON-like value with every string repaired and non-finite floats as None.

    For writers of JSON lines: a lone surrogate cannot be encoded as UTF-8 and
    ``NaN``/``Infinity`` are not JSON, so a record holding either (in an env's step
    info, say) is made writable instead of failing the run. Dict keys are repaired
    too; containers are copied, other values returned as they are.
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
