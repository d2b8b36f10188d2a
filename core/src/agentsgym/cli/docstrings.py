"""Docstrings as a terminal shows them: Sphinx roles (``:class:`~pkg.Name```) become the
plain name a reader would type, and ``literal`` markup loses its backticks."""

from __future__ import annotations

import re

__all__ = ["plain_docstring"]

_ROLE = re.compile(
    r":(?:[a-z]+:)?[a-z]+:`(?P<tilde>~?)(?P<target>[^`<]*?)(?:\s*<(?P<link>[^>]*)>)?`"
)
_LITERAL = re.compile(r"``(?P<text>[^`]+)``")


def _role(match: re.Match[str]) -> str:
    target = match["target"].strip() or (match["link"] or "")
    if match["tilde"]:  # Sphinx's ~: show only the last component
        target = target.rsplit(".", 1)[-1]
    return target


def plain_docstring(text: str) -> str:
    """``text`` with every role shown as its name (``:class:`~a.b.Name``` -> ``Name``,
    ``:func:`make``` -> ``make``) and ````code```` as ``code``."""
    return _LITERAL.sub(r"\g<text>", _ROLE.sub(_role, text))
