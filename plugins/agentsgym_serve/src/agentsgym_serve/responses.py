"""JSON replies that any client can read, whatever an env put in them.

An env's ``info`` is meant to be JSON, but may hold a tuple, a set, a NaN or a lone
surrogate code point (text UTF-8 cannot encode). The reply is written with
``ensure_ascii`` (a lone surrogate travels as its ``\\udXXX`` escape and comes back
as the same Python string), strict JSON (a non-finite float becomes ``null``) and
``str()`` for any other object (and key), so an odd value never turns a step into a 500.
"""

from __future__ import annotations

import json
import math
from typing import Any

from starlette.responses import Response


def _default(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return str(value)


def _plain(value: Any) -> Any:
    """Non-finite floats as None, keys JSON cannot take as str, recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {
            k if isinstance(k, (str, int, float, bool)) or k is None else str(k): _plain(v)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def dump_json(content: Any) -> bytes:
    """Strict, ASCII-only JSON of ``content`` (see the module docstring)."""
    try:
        text = json.dumps(
            content, ensure_ascii=True, allow_nan=False, default=_default, separators=(",", ":")
        )
    except (ValueError, TypeError):  # a NaN, an infinity or a key JSON cannot take
        text = json.dumps(
            _plain(content),
            ensure_ascii=True,
            allow_nan=False,
            default=_default,
            separators=(",", ":"),
        )
    return text.encode("ascii")


class SafeJSONResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return dump_json(content)
