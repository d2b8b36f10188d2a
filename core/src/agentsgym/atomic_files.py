"""Writing a file so that a crash leaves either the old content or the new, whole."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def write_atomically(path: Path, data: bytes | Callable[[Path], object]) -> None:
    """Write ``data`` (bytes, or a function that writes the file it is given) to a
    temporary file beside ``path``, fsync it, rename it over ``path``."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        if callable(data):
            data(tmp)
        else:
            tmp.write_bytes(data)
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:  # a full disk, an interrupt: leave no stray temporary file
        tmp.unlink(missing_ok=True)
        raise
