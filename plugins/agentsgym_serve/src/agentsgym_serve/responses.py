"""JSON replies that any client can read, whatever an env put in them.

An env's ``info`` is meant to be JSON, but may hold a tuple, a set, a NaN or a lone
surrogate code point (text UTF-8 cannot encode). The reply is written with
``ensure_ascii`` (a lone surrogate travels as its ``\\udXXX`` escape and comes back
as the same Python string), strict JSON (a non-finite float becomes ``null``) and
``str()`` for any other object (and key), so an odd value never turns a step into a 500.

An error reply echoes what it refuses (a field's input, a message that quotes a role
or a key) only in part: :func:`clip_echoes` cuts every text to the head and tail of
``ECHO_LIMIT`` characters and every list or object to ``ECHO_ITEMS`` entries, saying
how much was left out, so a 100 kB role name costs a client a short error, not 100 kB.
"""

from __future__ import annotations

import json
import math
from typing import Any

from starlette.responses import Response

ECHO_LIMIT = 1000
"""The most characters of one text an error reply echoes."""
ECHO_ITEMS = 50
"""The most entries of one list or object an error reply echoes."""


def clip_echoes(value: Any) -> Any:
    """``value`` (an error reply, or part of one) with every text, list and object cut
    to the echo limits, each cut saying how much it left out."""
    if isinstance(value, str):
        if len(value) <= ECHO_LIMIT:
            return value
        half = ECHO_LIMIT // 2  # the head and the tail: a message's end says what to do
        return f"{value[:half]}... ({len(value) - 2 * half} characters left out) ...{value[-half:]}"
    if isinstance(value, dict):
        items = list(value.items())
        clipped = {clip_echoes(k): clip_echoes(v) for k, v in items[:ECHO_ITEMS]}
        if len(items) > ECHO_ITEMS:
            clipped["..."] = f"{len(items) - ECHO_ITEMS} more entries"
        return clipped
    if isinstance(value, (list, tuple)):
        clipped_list = [clip_echoes(v) for v in value[:ECHO_ITEMS]]
        if len(value) > ECHO_ITEMS:
            clipped_list.append(f"... {len(value) - ECHO_ITEMS} more entries")
        return clipped_list
    return value


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


_ENCODER = json.JSONEncoder(
    ensure_ascii=True, allow_nan=False, default=_default, separators=(",", ":")
)
"""One encoder for every reply (``json.dumps`` with options builds one per call)."""


def json_text(content: Any) -> str:
    """Strict, ASCII-only JSON of ``content`` (see the module docstring), as text."""
    try:
        return _ENCODER.encode(content)
    except (ValueError, TypeError):  # a NaN, an infinity or a key JSON cannot take
        return _ENCODER.encode(_plain(content))


def dump_json(content: Any) -> bytes:
    """Strict, ASCII-only JSON of ``content`` (see the module docstring)."""
    return json_text(content).encode("ascii")


class SafeJSONResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return dump_json(content)
