"""The judge's prompt: a template with named fields, filled in per judgement.

A template is text with ``{name}`` fields (Python's ``str.format`` syntax; ``{{`` and
``}}`` are literal braces), filled with the keyword arguments of
:meth:`agentsgym_judge.Judge.score`. Its fields are read when the template is made, so
a template that cannot be filled is refused there, and a judgement missing a field is
refused naming it, before anything is sent.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

from agentsgym import Messages
from agentsgym_judge.errors import JudgeTemplateError

_GIVEN = """\
Question:
{question}

Reference answer:
{reference}

Response:
{answer}"""

CORRECTNESS_TEMPLATE = (
    "You grade answers. Decide whether the response gives the same answer as the reference "
    "answer to the question. Wording and form may differ; the answer itself must not.\n\n"
    f"{_GIVEN}\n\nIs the response correct? Reply with one word: yes or no."
)
"""The default: is ``{answer}`` right, given ``{question}`` and ``{reference}``? Read it
with :func:`~agentsgym_judge.parsers.yes_no`."""

SCORE_TEMPLATE = (
    "You grade answers. Rate how well the response answers the question, compared with the "
    "reference answer, on a scale from 0 (wrong or no answer) to 10 (fully correct and "
    f"complete).\n\n{_GIVEN}\n\nReply with the number only."
)
"""A graded score of ``{answer}``: read it with ``number(0, 10)``
(:func:`~agentsgym_judge.parsers.number`), which scales it to [0, 1]."""


class PromptTemplate:
    """A judge prompt: the user message ``text`` with named fields, after an optional
    ``system`` message (which may have fields too)."""

    def __init__(self, text: str, *, system: str | None = None) -> None:
        self.text = text
        self.system = system
        self.fields = _fields(text) | (_fields(system) if system is not None else frozenset())

    def render(self, values: Mapping[str, Any]) -> Messages:
        """The messages of one judgement; every field must be given (extra values are
        ignored, so one call can serve several templates)."""
        missing = sorted(self.fields - set(values))
        if missing:
            named = ", ".join(repr(name) for name in missing)
            raise JudgeTemplateError(
                f"the judge's template needs {named}, which this judgement was not given: "
                f"pass {', '.join(f'{name}=...' for name in missing)} to score()/ascore() "
                f"(the template's fields are {', '.join(sorted(self.fields))})"
            )
        messages: Messages = []
        if self.system is not None:
            messages.append({"role": "system", "content": self.system.format_map(values)})
        messages.append({"role": "user", "content": self.text.format_map(values)})
        return messages


def _fields(text: str) -> frozenset[str]:
    """The named fields of a template, refusing what ``render`` could not fill."""
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise JudgeTemplateError(
            f"the judge's template cannot be read ({exc}); write fields as {{name}} and "
            "literal braces as {{ and }}"
        ) from None
    names = set()
    for _literal, name, _spec, _conversion in parsed:
        if name is None:
            continue
        if not name.isidentifier():
            raise JudgeTemplateError(
                f"the judge's template has the field {{{name}}}; fields must be plain names "
                "such as {question} (no positions, attributes or indexes), and literal "
                "braces are written {{ and }}"
            )
        names.add(name)
    return frozenset(names)
