"""Keeping secrets out of everything a run records: its files, its logs, its summaries.

A value is a secret when its key's name looks like one (``api_key``, ``hf_token``...)
at any depth of a mapping, inside text written as ``key=value`` or ``"key": value``,
or when it is the userinfo of a URL (``http://KEY@host``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "REDACTED",
    "SECRET_KEY",
    "RedactingFilter",
    "is_secret",
    "redact",
    "redact_argv",
    "redact_text",
]

_SECRET_WORDS = r"api[_-]?key|secret|passw(?:or)?d|credential|auth(?:orization)?(?![a-z])"
SECRET_KEY = re.compile(rf"{_SECRET_WORDS}|(?:^|[_-])token$", re.IGNORECASE)
REDACTED = "<redacted>"
# A scheme is looked for only where a run of scheme characters starts: from every word
# boundary inside one ("a-b-c-..."), the scan to its end would take quadratic time.
_URL_USERINFO = re.compile(
    r"(?P<scheme>(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*+://)[^/\s@'\"]+@"
)
# The lookahead first checks, in one pass, that the word is a key (a separator follows
# it): else a long word full of secret words would be searched for a name in quadratic
# time. Errors can quote a model's degenerate reply, so both patterns stay linear.
_KEY_VALUE = re.compile(
    r"""(?<![\w-])(?=["']?[\w-]++["']?\s*[:=])"""
    rf"""(?P<key>["']?(?P<name>[\w-]*(?:{_SECRET_WORDS}|token)[\w-]*)["']?\s*[:=]\s*)"""
    r"""(?P<value>"[^"]*"|'[^']*'|(?:Bearer\s+)?[^\s,;}&'"=)\]]+)""",
    re.IGNORECASE,
)


def is_secret(key: str) -> bool:
    """Whether an option named ``key`` probably holds a secret (api_key, hf_token...)."""
    return bool(SECRET_KEY.search(key))


def redact(value: Any) -> Any:
    """``value`` with every secret replaced: values of secret-looking keys at any depth,
    secrets written inside text, and URL userinfo. Lists and tuples come back as lists."""
    if isinstance(value, Mapping):
        return {k: REDACTED if is_secret(str(k)) else redact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(item) for item in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def redact_text(text: str) -> str:
    """``text`` with URL userinfo and ``key=value`` / ``"key": "value"`` secrets replaced."""
    text = _URL_USERINFO.sub(rf"\g<scheme>{REDACTED}@", text)
    return _KEY_VALUE.sub(_redact_match, text)


def _redact_match(match: re.Match[str]) -> str:
    if not is_secret(match["name"]):
        return match[0]
    quote = match["value"][0] if match["value"][0] in "\"'" else ""
    return f"{match['key']}{quote}{REDACTED}{quote}"


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line with its secrets replaced: ``api_key=sk-...``, secrets inside JSON
    option values, URL userinfo, and the value after a ``--secret-looking`` flag."""
    redacted: list[str] = []
    for arg in argv:
        after_secret_flag = (
            bool(redacted)
            and redacted[-1].startswith("--")
            and "=" not in (redacted[-1])
            and is_secret(redacted[-1])
        )
        redacted.append(REDACTED if after_secret_flag else redact_text(arg))
    return redacted


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record's message before a handler formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True
