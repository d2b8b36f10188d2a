"""JSON in and out of the gateway: orjson's speed, ``json``'s values and the backend's bytes.

orjson parses a backend's answer about three times faster than ``json``, but it does not
read everything ``json`` reads, nor write floats as ``json`` does, so each use here says
when it is exact:

* :func:`loads` gives exactly ``json.loads``'s values: orjson where it is exact, ``json``
  where it is not (a number of 19 digits or more, which orjson may read as a float;
  ``NaN`` and ``Infinity``, a byte-order mark, which orjson refuses);
* :func:`loads_request` reads a program's request, refusing what is not JSON
  (``NaN``, ``Infinity``, a number too large for a float);
* :func:`dumps` writes what the gateway sends its backend: the same values, in
  whichever compact form;
* :func:`rewrite` writes a part of a backend's answer back the way the backend wrote
  it: with orjson when orjson writes the whole answer byte for byte as the backend did
  (checked per answer), else as Python's ``json`` writes compact JSON (Starlette's
  ``JSONResponse``, so the loopback server and vLLM). The two differ in floats below
  1e-4 (``1e-05`` against ``0.00001``, ``-3.2e-06`` against ``-3.2e-6``).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson

_LONG_NUMBER = re.compile(rb"\d{19}")
"""Digits that may be an integer outside 64 bits, which orjson reads as a float."""


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text} is too large for a float")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _as_bytes(raw: bytes | str) -> bytes:
    return raw.encode("utf-8") if isinstance(raw, str) else raw


def loads(raw: bytes | str) -> Any:
    """``json.loads(raw)``, exactly, faster (raises ValueError where it does)."""
    raw = _as_bytes(raw)
    if _LONG_NUMBER.search(raw) is None:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # NaN, Infinity, a byte-order mark, or not JSON: json says which
    return json.loads(raw)


def loads_request(raw: bytes | str) -> Any:
    """A program's request body: :func:`loads`, with ``NaN``, ``Infinity`` and numbers
    beyond a float's range refused (ValueError): they are not JSON, and would reach the
    backend as something else."""
    raw = _as_bytes(raw)
    if _LONG_NUMBER.search(raw) is None:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw, parse_constant=_no_constant, parse_float=_finite)


def _json_dumps(value: Any) -> bytes:
    """Compact JSON as Python's ``json`` (Starlette's ``JSONResponse``) writes it; a
    non-finite float as ``json`` reads it back (``NaN``), never refused."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def dumps(value: Any) -> bytes:
    """``value`` as compact JSON, its values exact (a body the gateway itself writes:
    values from :func:`loads_request` or the gateway's own, so no NaN)."""
    try:
        return orjson.dumps(value)
    except TypeError:  # an integer outside 64 bits
        return _json_dumps(value)


def written_by_orjson(raw: bytes, value: Any) -> bool:
    """Whether orjson writes ``value`` (``raw``'s parse) as exactly ``raw``."""
    try:
        return orjson.dumps(value) == raw
    except TypeError:
        return False


def rewrite(value: Any, orjson_form: bool) -> bytes:
    """``value``, a backend answer's JSON with fields taken out, written as the backend
    writes JSON: orjson's form where :func:`written_by_orjson` held for the answer,
    else Python's ``json``'s compact form."""
    if orjson_form:
        return orjson.dumps(value)
    return _json_dumps(value)
