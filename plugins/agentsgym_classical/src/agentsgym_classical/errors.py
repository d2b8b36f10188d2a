"""Errors of agentsgym-classical, in the agentsgym hierarchy.

Each message says what was wrong and what to do, as the core's errors do.
"""

from __future__ import annotations

from agentsgym.errors import AgentsGymError, DatasetRowError, EpisodeError


class DatasetLoadError(AgentsGymError):
    """A dataset named in env_config could not be loaded (offline, typo, bad file)."""


class DatasetColumnError(DatasetRowError):
    """A row of a benchmark dataset lacks a column, or holds a value of the wrong form."""


class GradingError(EpisodeError):
    """A reply could not be graded (every try timed out or broke), so the episode fails.

    Scoring such a reply as wrong or unparsed would make its reward depend on how busy
    the machine was; a failed episode is recorded with this error, counted by
    ``--max-failure-rate`` and kept out of training batches instead.
    """


class GradingUnavailableError(GradingError):
    """The grading worker process could not be started."""


class NoSuchSplitError(DatasetLoadError, NotImplementedError):
    """The source has no such split (e.g. a single local file has no train split).

    Also a NotImplementedError, the core's signal for "this env ships no dataset for
    that split", so ``check_env`` skips the split instead of failing.
    """


class GenerationError(AgentsGymError):
    """The embedded generator cannot make as many distinct problems as were asked for."""
