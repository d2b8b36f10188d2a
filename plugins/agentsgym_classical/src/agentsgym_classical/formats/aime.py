"""AIME: ``problem`` and an integer ``answer`` from 0 to 999."""

from __future__ import annotations

import re
from typing import Any

from agentsgym_classical.arithmetic.generator import WordProblem, format_number
from agentsgym_classical.formats.base import BenchmarkFormat, RowReader
from agentsgym_classical.problem import Problem

INTEGER = re.compile(r"^\s*(\d+)(?:\.0+)?\s*$")


class AIMEFormat(BenchmarkFormat):
    name = "aime"
    fields = ("problem", "answer")
    instruction = (
        "Solve the problem step by step. The answer is an integer from 0 to 999; "
        "put it in \\boxed{}."
    )

    def to_problem(self, row: RowReader) -> Problem:
        problem = str(row.required("problem"))
        raw = row.required("answer")
        match = INTEGER.match(str(raw))
        if match is None or isinstance(raw, bool) or not 0 <= int(match.group(1)) <= 999:
            raise row.error(
                "answer", f"is {raw!r}, not an integer from 0 to 999 as AIME answers are"
            )
        return Problem(id=row.id, problem=problem, answer=str(int(match.group(1))))

    def embedded_row(self, problem: WordProblem) -> dict[str, Any]:
        return {
            "problem": problem.text("count"),
            "answer": int(format_number(problem.answer("count"))),
        }
