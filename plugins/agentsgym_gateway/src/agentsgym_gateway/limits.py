"""Bounded request bodies: a program cannot make the gateway hold more than this, and
a large body's memory goes back to the system once its call is done."""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable
from typing import Any

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
"""16 MiB: a long agent conversation with its tool schemas is a few hundred KB."""


class BodyTooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(
            f"the request body is larger than the gateway's limit of {limit} bytes; shorten "
            "the conversation or start the gateway with a larger max_body_bytes"
        )


def declared_size(headers: Any) -> int | None:
    """The request's ``Content-Length``, when it gives one."""
    declared = headers.get("content-length")
    return int(declared) if declared is not None and declared.isdigit() else None


async def read_bounded(request: Any, limit: int) -> bytes | bytearray:
    """The request's body, or :class:`BodyTooLarge` as soon as it passes ``limit``. A
    body that came in one piece is that piece; one of several is written into one
    buffer of its declared size as they come (one copy of the body, never a list of its
    pieces and then their join)."""
    declared = declared_size(request.headers)
    if declared is not None and declared > limit:
        raise BodyTooLarge(limit)
    first = b""
    buffer: bytearray | None = None
    size = 0
    async for chunk in request.stream():
        end = size + len(chunk)
        if end > limit:
            raise BodyTooLarge(limit)
        if buffer is None and not size:
            first = chunk
        else:
            if buffer is None:
                buffer = bytearray(max(declared or 0, end))
                buffer[:size] = first
            if end <= len(buffer):
                buffer[size:end] = chunk
            else:
                buffer[size:] = chunk  # a body longer than declared grows the buffer
        size = end
    if buffer is None:
        return first
    del buffer[size:]
    return buffer


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` (``None`` elsewhere: other allocators give memory back
    themselves, or keep no such knob)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return getattr(libc, "malloc_trim", None)


def release_freed_memory() -> None:
    """Give the memory a large body's call freed back to the system. glibc keeps freed
    memory for reuse, the more so after a large block (its thresholds grow with the
    largest block freed): one 15 MB body left the process 30 to 45 MB larger for good."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
