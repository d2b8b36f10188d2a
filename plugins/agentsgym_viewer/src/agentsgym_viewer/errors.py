"""The viewer's errors: part of the :mod:`agentsgym.errors` hierarchy.

Each message says what is wrong with the file or the options and what to do.
"""

from __future__ import annotations

from agentsgym.errors import AgentsGymError


class ViewerError(AgentsGymError):
    """Base class of the errors ``agentsgym view`` raises."""


class TrajectoryFileError(ViewerError):
    """A file the viewer cannot show: missing, unreadable, or not rollouts/eval results."""


class ViewFilterError(ViewerError):
    """Filter options that cannot select anything (a minimum reward above the maximum)."""


class ViewOutputError(ViewerError):
    """The HTML page cannot be written where it was asked to go."""
