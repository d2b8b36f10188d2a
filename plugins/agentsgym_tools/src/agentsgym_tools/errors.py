"""The errors of agentsgym-tools.

The author's mistakes are raised when the env is built or an episode starts
(:class:`ToolDeclarationError`). A model's bad call is never an error: it becomes a tool
message. A tool raises :class:`ToolError` to tell the model why it failed, in its own
words; a tool that cannot run at all (its server died) raises
:class:`ToolUnavailableError`, which fails the episode instead of answering the model.
"""

from __future__ import annotations

from agentsgym.errors import AgentsGymError

__all__ = ["ToolDeclarationError", "ToolError", "ToolUnavailableError"]


class ToolDeclarationError(AgentsGymError, ValueError):
    """A tool that cannot be declared: no schema can be derived, or names clash."""


class ToolError(Exception):
    """Raised by a tool for a failure the model should read: the call is answered
    ``Error: <tool>: <message>``, without the exception's type."""


class ToolUnavailableError(AgentsGymError, RuntimeError):
    """A tool that could not be run at all (its MCP server exited during the call): the
    episode fails with this error, so a broken tool never makes an ok episode."""
