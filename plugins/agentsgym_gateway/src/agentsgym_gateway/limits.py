"""Bounded request bodies: a program cannot make the gateway hold more than this."""

from __future__ import annotations

from typing import Any

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
"""16 MiB: a long agent conversation with its tool schemas is a few hundred KB."""


class BodyTooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(
            f"the request body is larger than the gateway's limit of {limit} bytes; shorten "
            "the conversation or start the gateway with a larger max_body_bytes"
        )


async def read_bounded(request: Any, limit: int) -> bytes:
    """The request's body, or :class:`BodyTooLarge` as soon as it passes ``limit``."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)
