"""Parsing of repeated ``key=value`` options shared by several commands."""

from __future__ import annotations

import json
from typing import Any

import typer


def parse_key_values(pairs: list[str] | None, what: str) -> dict[str, Any]:
    """``["a=1", "b=[1, 2]", "c=text"]`` -> ``{"a": 1, "b": [1, 2], "c": "text"}``.

    Values are read as JSON when they parse as JSON, else kept as strings.
    """
    result: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"{what} must look like key=value, got {pair!r}")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        result[key.strip()] = value
    return result
