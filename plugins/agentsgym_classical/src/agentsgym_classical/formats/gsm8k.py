"""GSM8K: ``question`` and ``answer``, the answer's worked solution ending in ``#### N``."""

from __future__ import annotations

from typing import Any

from agentsgym_classical.arithmetic.generator import WordProblem, format_number
from agentsgym_classical.formats.base import BenchmarkFormat, RowReader
from agentsgym_classical.grading.normalize import hash_answer
from agentsgym_classical.problem import Problem


class GSM8KFormat(BenchmarkFormat):
    name = "gsm8k"
    fields = ("question", "answer")
    instruction = (
        "Solve the problem step by step. End your reply with the final answer, a number, "
        "on its own line in the form: #### <answer>"
    )

    def to_problem(self, row: RowReader) -> Problem:
        question = str(row.required("question"))
        raw = str(row.required("answer")).strip()
        answer = hash_answer(raw) if "####" in raw else (raw if len(raw) <= 40 else None)
        if not answer:
            raise row.error("answer", f"has no final '#### N' line (value {raw[-80:]!r})")
        return Problem(id=row.id, problem=question, answer=answer)

    def embedded_row(self, problem: WordProblem) -> dict[str, Any]:
        lines = [
            f"{s.expression} = <<{s.expression.replace(' ', '')}={format_number(s.result)}>>"
            f"{format_number(s.result)}"
            for s in problem.steps
        ]
        return {
            "question": problem.text("count"),
            "answer": "\n".join([*lines, f"#### {format_number(problem.answer('count'))}"]),
        }
