"""The errors of agentsgym-tools: the author's mistakes, raised when the env is built or
an episode starts. A model's bad call is never an error: it becomes a tool message."""

from __future__ import annotations

from agentsgym.errors import AgentsGymError

__all__ = ["ToolDeclarationError"]


class ToolDeclarationError(AgentsGymError, ValueError):
    """A tool that cannot be declared: no schema can be derived, or names clash."""
