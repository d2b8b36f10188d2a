"""Errors of agentsgym-classical, in the agentsgym hierarchy.

Each message says what was wrong and what to do, as the core's errors do.
"""

from __future__ import annotations

from agentsgym.errors import AgentsGymError, DatasetRowError


class DatasetLoadError(AgentsGymError):
    """A dataset named in env_config could not be loaded (offline, typo, bad file)."""


class DatasetColumnError(DatasetRowError):
    """A row of a benchmark dataset lacks a column, or holds a value of the wrong form."""


class GradingUnavailableError(AgentsGymError):
    """The grading worker process could not be started."""


class NoSuchSplitError(DatasetLoadError, NotImplementedError):
    """The source has no such split (e.g. a single local file has no train split).

    Also a NotImplementedError, the core's signal for "this env ships no dataset for
    that split", so ``check_env`` skips the split instead of failing.
    """


class GenerationError(AgentsGymError):
    """The embedded generator cannot make as many distinct problems as were asked for."""
