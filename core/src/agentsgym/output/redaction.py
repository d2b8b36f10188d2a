"""Keeping secrets out of the files a run leaves beside its output.

The run record and the lock name the command that wrote the output, and the run record
keeps the agent's options: the value of a key whose name looks like a secret is replaced.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

SECRET_KEY = re.compile(r"(api_?key|secret|passw(or)?d|credential|auth|(^|_)token$)", re.IGNORECASE)
REDACTED = "<redacted>"


def is_secret(key: str) -> bool:
    """Whether an option named ``key`` probably holds a secret (api_key, hf_token...)."""
    return bool(SECRET_KEY.search(key))


def redact_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with the values of secret-looking keys replaced."""
    return {k: (REDACTED if is_secret(k) else v) for k, v in options.items()}


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line with the values of secret-looking ``key=value`` arguments replaced
    (``api_key=sk-...`` and ``--agent-option=api_key=sk-...`` alike)."""
    return [_redact_argument(arg) for arg in argv]


def _redact_argument(arg: str) -> str:
    parts = arg.split("=")
    for index, key in enumerate(parts[:-1]):
        if is_secret(key.lstrip("-")):
            return "=".join(parts[: index + 1]) + "=" + REDACTED
    return arg
