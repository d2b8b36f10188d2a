"""Docstrings as a terminal shows them: Sphinx roles (``:class:`~pkg.Name```) become the
plain name a reader would type, ``literal`` markup loses its backticks, and the lines of
a plain paragraph join, so that the terminal wraps them at its own width."""

from __future__ import annotations

import re

__all__ = ["plain_docstring"]

_ROLE = re.compile(
    r":(?:[a-z]+:)?[a-z]+:`(?P<tilde>~?)(?P<target>[^`<]*?)(?:\s*<(?P<link>[^>]*)>)?`"
)
_LITERAL = re.compile(r"``(?P<text>[^`]+)``")
_KEEPS_ITS_LINES = re.compile(r"^(\s|[*+-] |\d+[.)] |:|>>>)")
"""A line of a list, a field list, an indented block or a doctest: not reflowed."""


def _role(match: re.Match[str]) -> str:
    target = match["target"].strip() or (match["link"] or "")
    if match["tilde"]:  # Sphinx's ~: show only the last component
        target = target.rsplit(".", 1)[-1]
    return target


def _reflow(paragraph: str) -> str:
    lines = paragraph.splitlines()
    if any(_KEEPS_ITS_LINES.match(line) for line in lines):
        return paragraph
    return " ".join(line.strip() for line in lines)


def plain_docstring(text: str) -> str:
    """``text`` (a cleaned docstring) with every role shown as its name
    (``:class:`~a.b.Name``` -> ``Name``, ``:func:`make``` -> ``make``), ````code```` as
    ``code``, and each plain paragraph on one line."""
    plain = _LITERAL.sub(r"\g<text>", _ROLE.sub(_role, text))
    return "\n\n".join(_reflow(paragraph) for paragraph in plain.split("\n\n"))
