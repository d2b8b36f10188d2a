"""What the grader is asked (GradeRequest) and what it answers (Verdict).

Both cross the process boundary to the grading worker as JSON, hence pydantic.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

AnswerKind = Literal["math", "choice"]
Status = Literal["correct", "wrong", "unparsed", "too_long", "too_nested", "timeout", "error"]


class GradeRequest(BaseModel):
    """One reply to judge against one reference answer."""

    model_config = ConfigDict(extra="forbid")

    gold: str = Field(description="reference answer: a number, a LaTeX expression or a letter")
    reply: str = Field(description="the agent's reply, verbatim")
    kind: AnswerKind = "math"
    choices: dict[str, str] | None = Field(
        default=None, description="letter -> option text, for kind='choice'"
    )
    timeout_seconds: int = Field(
        default=1, ge=1, description="math-verify's own per-call timeout inside the worker"
    )


class Verdict(BaseModel):
    """The grader's judgement of one reply."""

    status: Status
    answer: str | None = Field(
        default=None, description="canonical form of the parsed answer (the cons@k vote)"
    )
    extracted: str | None = Field(default=None, description="the answer text as found in the reply")
    detail: str = ""
    seconds: float = 0.0
    attempts: int = Field(
        default=1, description="tries it took: more than 1 when an ungraded try was retried"
    )

    @property
    def correct(self) -> bool:
        return self.status == "correct"

    @property
    def graded(self) -> bool:
        """False when the reply could not be judged (a timeout, a grader error): the
        machine failed, not necessarily the answer."""
        return self.status not in ("timeout", "error")
