"""ToolContext: what a tool may know of its episode, never shown to the model.

A tool function asks for it with a parameter annotated :class:`ToolContext` (any name):
the runner passes it, and the parameter is left out of the schema the model sees, as
verifiers' ``StatefulToolEnv`` hides its ``skipped_args``. The model cannot set it: a
call that names it is answered with an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolContext"]


@dataclass
class ToolContext:
    """The episode a call belongs to.

    :ivar task_data: the episode's task (the dataset row's ``task_data``).
    :ivar state: the episode's current state, as the engine gives it with each reply's
        calls (the same object: a tool that changes a mutable state changes what
        ``step_episode`` sees); ``None`` before the episode's first call.
    :ivar session_id: the episode's session id, given the same way (``None`` before its
        first call).
    :ivar scratch: a dict of the episode's own, shared by its tools' calls.
    """

    task_data: dict[str, Any]
    state: Any = None
    session_id: str | None = None
    scratch: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        # an error that quotes the context must not show the task to the model
        return f"ToolContext(session_id={self.session_id!r})"
