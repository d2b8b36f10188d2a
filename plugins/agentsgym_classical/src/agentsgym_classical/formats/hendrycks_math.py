"""MATH and MATH-500: ``problem``, ``solution`` (with ``\\boxed{}``) and ``answer``.

The reference is the ``answer`` column when the dataset has one (MATH-500 does),
else the last ``\\boxed{...}`` of the solution (the original MATH release).
"""

from __future__ import annotations

from typing import Any

from agentsgym_classical.arithmetic.generator import WordProblem, latex_number
from agentsgym_classical.formats.base import BenchmarkFormat, RowReader
from agentsgym_classical.problem import Problem

BOXED = ("\\boxed{", "\\fbox{")


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` in ``text`` (braces balanced), or None."""
    start = max(text.rfind(marker) for marker in BOXED)
    if start < 0:
        return None
    open_at = text.index("{", start)
    depth = 0
    for position in range(open_at, len(text)):
        if text[position] == "{":
            depth += 1
        elif text[position] == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : position].strip() or None
    return None


class MathFormat(BenchmarkFormat):
    name = "math"
    fields = ("problem", "solution", "answer")
    instruction = "Solve the problem step by step and put your final answer in \\boxed{}."

    def to_problem(self, row: RowReader) -> Problem:
        problem = str(row.required("problem"))
        answer = row.optional("answer")
        if answer is None:
            solution = row.optional("solution")
            if solution is None:
                raise row.error(
                    "answer", "is missing, and there is no solution to take \\boxed{} from"
                )
            answer = last_boxed(str(solution))
            if answer is None:
                raise row.error(
                    "solution", "has no \\boxed{...} answer (and there is no answer column)"
                )
        return Problem(id=row.id, problem=problem, answer=str(answer).strip())

    def embedded_row(self, problem: WordProblem) -> dict[str, Any]:
        answer = latex_number(problem.answer("fraction"))
        steps = " ".join(f"${line}$." for line in problem.worked_lines())
        return {
            "problem": problem.text("fraction"),
            "solution": f"{steps} The fraction left is $\\boxed{{{answer}}}$.",
            "answer": answer,
        }
