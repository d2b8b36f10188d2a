"""What the episode protocol answers: a step's :class:`TurnOutcome` and the closing
:class:`FinishedEpisode` (:mod:`agentsgym.engine.session`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentsgym.trajectory import Episode, StepRecord
from agentsgym.types import Messages


@dataclass(slots=True, kw_only=True)
class TurnOutcome:
    """What one step did, and the next prompt, as the role that acted sees them.

    ``reward`` is the env's own step reward, ``terms`` the ``reward_shaping`` terms (the
    step's whole reward is ``record.reward``, where ``finish`` adds its terms on the
    last step); ``info`` is the env's (for a tool turn, ``{"tool_calls": n}``).
    ``done``/``truncated``: the episode ended (the env said so / the step limit).
    ``messages`` are the acting role's new messages up to its next prompt, empty once the
    episode is over. ``tool_results`` are the tool messages of a tool turn (``None``
    otherwise). ``record`` is the step as the episode records it; ``role`` the role that
    acted (``None`` without roles).
    """

    reward: float
    terms: dict[str, float]
    done: bool
    truncated: bool = False
    info: dict[str, Any]
    messages: Messages = field(default_factory=list)
    tool_results: Messages | None = None
    record: StepRecord
    role: str | None = None

    @property
    def over(self) -> bool:
        """The episode ended on this step (the env said so, or the step limit)."""
        return self.done or self.truncated


@dataclass(frozen=True, slots=True)
class FinishedEpisode:
    """The closing state: every role's finished record (``episodes``, in the env's role
    order; one without roles), ``finish_episode``'s ``terms``, what finishing added to
    each role's last step (``settled``: those terms on the role that acted last, the
    game's ``outcome`` from ``role_rewards``; nothing when the episode failed), and
    ``error``: ``finish_episode``'s own failure, if it failed (on the episode too)."""

    episodes: tuple[Episode, ...]
    terms: dict[str, float]
    settled: dict[str | None, dict[str, float]]
    error: str | None = None

    @property
    def episode(self) -> Episode:
        """The record of an episode without roles (with roles, the first role's)."""
        return self.episodes[0]
