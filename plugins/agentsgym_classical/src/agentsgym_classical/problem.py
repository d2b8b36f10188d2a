"""Problem: the ``task_data`` of every classical env (one problem, its reference answer).

Every benchmark format is parsed into this one shape when a dataset is built, so the
envs play GSM8K, MATH, AIME and multiple-choice rows alike and a rows file stays
self-contained (no dataset download is needed to replay it).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentsgym.errors import DatasetRowError
from agentsgym.runtime import describe_validation_error


class Problem(BaseModel):
    """One problem and its reference answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(description="stable id within the source, e.g. 'test/17'")
    problem: str = Field(min_length=1, description="the problem text shown to the agent")
    answer: str = Field(
        min_length=1, description="reference answer: a number, LaTeX, or a choice letter"
    )
    choices: dict[str, str] | None = Field(
        default=None, description="multiple choice only: letter -> option text"
    )

    @classmethod
    def from_task_data(cls, task_data: dict[str, Any]) -> Problem:
        """Validate ``task_data``; a bad one raises DatasetRowError saying which field."""
        try:
            return cls.model_validate(task_data)
        except ValidationError as exc:
            raise DatasetRowError(
                describe_validation_error(exc, "task_data of a classical env")
                + "\ntask_data must be {id, problem, answer[, choices]}"
            ) from None

    def to_task_data(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)
