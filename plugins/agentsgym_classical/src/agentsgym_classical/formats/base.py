"""What a benchmark format is, and reading a dataset row through a column mapping.

A format turns one row of its benchmark (GSM8K's ``question``/``answer``, MATH's
``problem``/``solution``/``answer``, ...) into a :class:`Problem`, says how the
answer is judged (``kind``) and what the agent is told about the answer format. It
can also write a generated problem as a row of its own layout, which is how the
envs run offline on the embedded family through the same parsing code as real data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from agentsgym_classical.arithmetic.generator import WordProblem
from agentsgym_classical.errors import DatasetColumnError
from agentsgym_classical.grading import AnswerKind
from agentsgym_classical.problem import Problem


class RowReader:
    """One dataset row seen through ``columns`` (the env's field -> the dataset's column).

    Errors name the source, split, row index, field and column, and say how to map a
    differently named column.
    """

    def __init__(
        self,
        row: Mapping[str, Any],
        index: int,
        *,
        split: str,
        source: str,
        columns: Mapping[str, str],
    ) -> None:
        self.row, self.index, self.split, self.source, self.columns = (
            row,
            index,
            split,
            source,
            columns,
        )

    @property
    def id(self) -> str:
        return f"{self.split}/{self.index}"

    def column(self, field: str) -> str:
        return self.columns.get(field, field)

    def optional(self, field: str) -> Any:
        """The value, or ``None`` when the column is absent or empty."""
        value = self.row.get(self.column(field))
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        return value

    def required(self, field: str) -> Any:
        value = self.optional(field)
        if value is None:
            raise self.error(field, "is missing or empty")
        return value

    def error(self, field: str, problem: str) -> DatasetColumnError:
        column = self.column(field)
        mapped = f" (mapped from field {field!r})" if column != field else ""
        return DatasetColumnError(
            f"{self.source}, split {self.split!r}, row {self.index}: column {column!r}{mapped} "
            f"{problem}. The row has columns {sorted(self.row)}. If the dataset names it "
            f"differently, map it with env_config columns={{{field!r}: '<column>'}}."
        )


class BenchmarkFormat:
    """A benchmark's row layout, answer kind and answer instruction."""

    name: ClassVar[str]
    kind: ClassVar[AnswerKind] = "math"
    fields: ClassVar[tuple[str, ...]]
    instruction: ClassVar[str]

    def to_problem(self, row: RowReader) -> Problem:
        raise NotImplementedError

    def embedded_row(self, problem: WordProblem) -> dict[str, Any]:
        """A generated problem written as a row of this format."""
        raise NotImplementedError

    def prompt(self, problem: Problem) -> str:
        """The problem as the agent first sees it (before the instruction)."""
        return problem.problem
