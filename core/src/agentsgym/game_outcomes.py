"""A role's results over games: the win, draw and loss rates of its outcomes.

A game's outcome for a role is what the env's ``role_rewards`` gave it (kept as
``episode.metrics["outcome"]``): above 0 a win, 0 a draw, below 0 a loss. ``agentsgym
eval`` reports these rates per role, and the training step log has them per role too.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["win_draw_loss"]


def win_draw_loss(outcomes: Sequence[float | None]) -> tuple[float, float, float]:
    """The win, draw and loss rates of a role's outcomes (``None``: a failed game, a loss)."""
    if not outcomes:
        raise ValueError("win rates of no games are undefined")
    signs = [-1 if o is None else (o > 0) - (o < 0) for o in outcomes]
    return tuple(signs.count(hit) / len(signs) for hit in (1, 0, -1))  # type: ignore[return-value]
