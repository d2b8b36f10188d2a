"""Multiple choice, AQuA-RAT style: ``question``, ``options`` and ``correct`` (a letter).

``options`` may be a list of labelled strings (``"A)21"``, ``"(B) 22"``, ``"C. 23"``),
a list of plain strings (lettered A, B, C, ... in order), a ``{letter: text}`` dict,
or ``{"label": [...], "text": [...]}`` (ARC style). ``correct`` may be a letter
(``"C"``, ``"(C)"``) or a 0-based index.
"""

from __future__ import annotations

import random
import re
import string
from typing import Any

from agentsgym_classical.arithmetic.generator import WordProblem
from agentsgym_classical.formats.base import BenchmarkFormat, RowReader
from agentsgym_classical.problem import Problem

LETTERS = string.ascii_uppercase[:10]
LABELLED = re.compile(r"^\s*\(?([A-J])\s*[).:]\s*(.*)$", re.DOTALL)
LETTER = re.compile(r"^\s*\(?([A-J])\)?\s*$")


def parse_options(raw: Any) -> dict[str, str] | None:
    """``{letter: text}`` from any supported layout, or None if it is not one."""
    if isinstance(raw, dict) and set(raw) == {"label", "text"}:
        raw = dict(zip(raw["label"], raw["text"]))
    if isinstance(raw, dict):
        options = {str(k).strip().upper(): str(v).strip() for k, v in raw.items()}
        return options if all(LETTER.match(k) for k in options) else None
    if not isinstance(raw, (list, tuple)):
        return None
    texts = [str(item) for item in raw]
    labelled = [LABELLED.match(text) for text in texts]
    if all(labelled):
        return {m.group(1): m.group(2).strip() for m in labelled if m}
    return dict(zip(LETTERS, (t.strip() for t in texts)))


class MultipleChoiceFormat(BenchmarkFormat):
    name = "choice"
    kind = "choice"
    fields = ("question", "options", "correct")
    instruction = (
        "Think step by step, then give the letter of the correct option in \\boxed{}, "
        "for example \\boxed{A}."
    )

    def to_problem(self, row: RowReader) -> Problem:
        question = str(row.required("question"))
        raw_options = row.required("options")
        options = parse_options(raw_options)
        if options is None or not 2 <= len(options) <= len(LETTERS):
            raise row.error(
                "options", f"is {str(raw_options)[:120]!r}, not a list of 2 to 10 options"
            )
        raw = row.required("correct")
        if isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw < len(options):
            letter = sorted(options)[raw]
        else:
            match = LETTER.match(str(raw))
            letter = match.group(1) if match else None
        if letter not in options:
            raise row.error(
                "correct", f"is {raw!r}, not one of the option letters {sorted(options)}"
            )
        return Problem(id=row.id, problem=question, answer=letter, choices=options)

    def prompt(self, problem: Problem) -> str:
        options = "\n".join(
            f"{letter}) {text}" for letter, text in sorted((problem.choices or {}).items())
        )
        return f"{problem.problem}\n\nOptions:\n{options}"

    def embedded_row(self, problem: WordProblem) -> dict[str, Any]:
        answer = int(problem.answer("count"))
        rng = random.Random(problem.text())
        wrong: set[int] = set()
        if len(problem.steps) > 1:  # the classic slip: stop one step early
            wrong.add(int(problem.steps[-2].result))
        while len(wrong) < 4:
            wrong.add(max(1, answer + rng.choice([-1, 1]) * rng.randint(1, 12)))
            wrong.discard(answer)
        values = [answer, *sorted(wrong)[:4]]
        rng.shuffle(values)
        letters = LETTERS[: len(values)]
        return {
            "question": problem.text("count"),
            "options": [f"{letter}){value}" for letter, value in zip(letters, values)],
            "rationale": "\n".join(problem.worked_lines()),
            "correct": letters[values.index(answer)],
        }
