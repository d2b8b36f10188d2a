"""Whether a played episode solved its task: the rule ``agentsgym eval``'s accuracy and
``agentsgym train --eval-steps``'s success rate share.

An env says so in its step ``info`` dicts: ``info["correct"]`` (bool) on the action that
solved the task. An episode is correct when any of its steps reports ``correct: True``;
an env that never reports the key is judged by reward instead (correct when the final
reward is positive). A failed episode (an error) is never correct, so a crash never
inflates a score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

__all__ = ["is_correct"]

CORRECT_KEY = "correct"
"""The step-info key by which an env says that an action solved the task."""


class _Step(Protocol):
    @property
    def info(self) -> Mapping[str, Any]: ...


class _PlayedEpisode(Protocol):
    """What the rule reads of an :class:`~agentsgym.Episode`."""

    @property
    def error(self) -> str | None: ...

    @property
    def final_reward(self) -> float: ...

    @property
    def steps(self) -> Sequence[_Step]: ...


def is_correct(episode: _PlayedEpisode) -> bool:
    """Whether ``episode`` solved its task (see the module docstring)."""
    if episode.error is not None:
        return False
    reported = [step.info[CORRECT_KEY] for step in episode.steps if CORRECT_KEY in step.info]
    if reported:
        return any(value is True for value in reported)
    return episode.final_reward > 0
