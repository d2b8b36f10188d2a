"""JSON in and out of the gateway: orjson's speed, ``json``'s values and the backend's bytes.

orjson parses a backend's answer about three times faster than ``json``, but it does not
read everything ``json`` reads, nor write floats as ``json`` does, so each use here says
when it is exact:

* :func:`loads` gives exactly ``json.loads``'s values: orjson where it is exact, ``json``
  where it is not (a number of 19 digits or more, which orjson may read as a float;
  ``NaN`` and ``Infinity``, a byte-order mark, which orjson refuses);
  :func:`parse_answer` does the same for a backend's answer, and says whether orjson
  writes it back byte for byte (which also proves the parse exact, sparing the scan
  for long numbers);
* :func:`loads_request` reads a program's request, refusing what is not JSON
  (``NaN``, ``Infinity``, a number too large for a float);
* :func:`dumps` writes what the gateway sends its backend: the same values, in
  whichever compact form;
* :func:`rewrite` writes a part of a backend's answer back the way the backend wrote
  it: with orjson when orjson writes the whole answer byte for byte as the backend did
  (checked per answer), else as Python's ``json`` writes compact JSON (Starlette's
  ``JSONResponse``, so the loopback server). The two differ in floats below
  1e-4 (``1e-05`` against ``0.00001``, ``-3.2e-06`` against ``-3.2e-6``).

A program's body of :data:`LARGE_BODY_BYTES` or more is read and written by ``json``
alone (:func:`loads_request`, :func:`loads`, ``dumps(large=True)``): orjson's working
memory is 13 times the text it reads and up to 16 times a long string it writes (a 15
MB body took 210 MB at its peak, and the allocator kept a part of it after the call);
``json``'s is twice the body, and its time is that of sending such a body.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

_DIGITS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
"""Every digit to ``0``, every other byte to a space."""
_LONG_RUN = b"0" * 19
"""19 digits in a row: maybe an integer outside 64 bits, which orjson reads as a float."""
LARGE_BODY_BYTES = 1 << 20
"""From 1 MiB on, a program's body is parsed and written by ``json`` (module docstring)."""


def _has_long_number(raw: bytes) -> bool:
    """Whether ``raw`` holds 19 digits in a row (one C pass; a regular expression takes
    ten times longer over a long list of ids)."""
    return _LONG_RUN in raw.translate(_DIGITS)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text} is too large for a float")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _as_bytes(raw: bytes | bytearray | str) -> bytes | bytearray:
    return raw.encode("utf-8") if isinstance(raw, str) else raw


def loads(raw: bytes | bytearray | str) -> Any:
    """``json.loads(raw)``, exactly, faster below :data:`LARGE_BODY_BYTES` (raises
    ValueError where it does)."""
    raw = _as_bytes(raw)
    if len(raw) >= LARGE_BODY_BYTES:
        return json.loads(raw)
    if not _has_long_number(raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # NaN, Infinity, a byte-order mark, or not JSON: json says which
    return json.loads(raw)


def parse_answer(raw: bytes) -> tuple[Any, bool]:
    """A backend's answer: :func:`loads`'s value, and whether orjson writes that value
    as exactly ``raw`` (:func:`rewrite`'s ``orjson_form``)."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw), False
    if orjson.dumps(value) == raw:
        return value, True  # every number written back as it came: none was misread
    if not _has_long_number(raw):
        return value, False
    return json.loads(raw), False


def loads_request(raw: bytes | bytearray | str) -> Any:
    """A program's request body: :func:`loads`, with ``NaN``, ``Infinity`` and numbers
    beyond a float's range refused (ValueError): they are not JSON, and would reach the
    backend as something else."""
    raw = _as_bytes(raw)
    if len(raw) < LARGE_BODY_BYTES and not _has_long_number(raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw, parse_constant=_no_constant, parse_float=_finite)


def _json_dumps(value: Any) -> bytes:
    """Compact JSON as Python's ``json`` (Starlette's ``JSONResponse``) writes it; a
    non-finite float as ``json`` reads it back (``NaN``), never refused."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def dumps(value: Any, *, large: bool = False) -> bytes:
    """``value`` as compact JSON, its values exact (a body the gateway itself writes:
    values from :func:`loads_request` or the gateway's own, so no NaN). ``large``: a
    program's body of :data:`LARGE_BODY_BYTES` or more, written by ``json`` (ASCII, its
    fastest form)."""
    if large:
        return json.dumps(value, separators=(",", ":")).encode("ascii")
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
    writes JSON: orjson's form where orjson wrote the whole answer as the backend did
    (:func:`parse_answer`, :func:`written_by_orjson`), else Python's ``json``'s compact
    form."""
    if orjson_form:
        return orjson.dumps(value)
    return _json_dumps(value)
