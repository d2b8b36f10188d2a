"""The rows of one training step, which say their step (recorded with each played row)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class StepRows(list):  # type: ignore[type-arg]
    """Dataset rows (or TRL prompt entries) played for training step ``step``."""

    def __init__(self, rows: Iterable[Any], *, step: int) -> None:
        super().__init__(rows)
        self.step = step
