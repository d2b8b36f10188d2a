"""agentsgym-scaffold's own error."""

from __future__ import annotations

from agentsgym.errors import AgentsGymError


class ScaffoldError(AgentsGymError, ValueError):
    """``agentsgym new-env`` cannot write the package: a bad name or a non-empty folder."""
