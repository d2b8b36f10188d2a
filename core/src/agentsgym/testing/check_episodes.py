"""Helpers of check_env's checks on played episodes: a probe of ``finish_episode``
calls, the comparison of two plays of one task, and where a step info stops being JSON."""

from __future__ import annotations

import math
from typing import Any

from agentsgym.hookspecs import hookimpl
from agentsgym.trajectory import Episode

__all__ = ["FinishProbe", "episode_difference", "episode_key", "json_problem"]


class FinishProbe:
    """A plugin for an env's hook relay: records every finish_episode call as
    ``(session_id, truncated)`` and what any implementation raised. As a hook wrapper it
    sees each call once however many implementations run (list.append is thread-safe).
    """

    def __init__(self) -> None:
        self.calls: list[tuple[str, bool]] = []
        self.failures: list[str] = []

    @hookimpl(wrapper=True)
    def finish_episode(self, session_id: str, truncated: bool, error: str | None) -> Any:
        self.calls.append((session_id, bool(truncated)))
        try:
            return (yield)
        except Exception as exc:
            self.failures.append(f"{type(exc).__name__}: {exc}")
            raise


def episode_key(episode: Episode) -> tuple[int, int, int, str]:
    """Where an episode sits in its batch: (task, rollout, episode of the trial, role)."""
    return episode.task_index, episode.rollout_index, episode.episode_index, episode.role or ""


def episode_difference(first: Episode | None, second: Episode | None) -> str:
    """How two plays of the same episode differ (``""`` when they do not)."""
    if first is None or second is None:
        return "played in one run only"
    if first.error != second.error:
        return f"errors differ: {first.error!r} vs {second.error!r}"
    for index, (a, b) in enumerate(zip(first.messages, second.messages)):
        if a != b:
            return f"message {index} differs: {a['content']!r:.100} vs {b['content']!r:.100}"
    if len(first.messages) != len(second.messages):
        return f"{len(first.messages)} vs {len(second.messages)} messages"
    rewards = ([s.reward for s in first.steps], [s.reward for s in second.steps])
    if rewards[0] != rewards[1]:
        return f"step rewards differ: {rewards[0]} vs {rewards[1]}"
    return ""


def json_problem(value: Any, path: str = "") -> str:
    """Where ``value`` stops being JSON (``"['board']: a set"``), or ``""``."""
    if value is None or isinstance(value, (str, bool, int)):
        return ""
    if isinstance(value, float):
        return "" if math.isfinite(value) else f"{path}: the non-finite float {value!r}"
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, (list, tuple)):
        items = list(enumerate(value))
    else:
        return f"{path}: a {type(value).__name__} ({value!r:.60})"
    for key, item in items:
        if isinstance(value, dict) and not isinstance(key, str):
            return f"{path}: the non-string key {key!r}"
        problem = json_problem(item, f"{path}[{key!r}]")
        if problem:
            return problem
    return ""
