"""The closing record of an episode: rewards, metrics, token segments, checks.

When an episode ends, each role's view (one for an env without roles) becomes a
finished :class:`~agentsgym.trajectory.Episode`: the step rewards add up to its final
reward, the reward terms to its metrics, and, when it was tokenized, its segments get
their per-token rewards by the env's ``reward_strategy`` and are checked.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from agentsgym.redaction import redact_text
from agentsgym.rewards import assign_token_rewards
from agentsgym.trajectory import TokenSegment, rewards_array

if TYPE_CHECKING:
    from agentsgym.engine.role_views import RoleView

logger = logging.getLogger(__name__)


def close_record(view: RoleView, reward_strategy: str) -> None:
    """Close one role's episode record: its final reward, its metrics (turns, the sum of
    each reward term, the env's own share, the game's outcome), its token segments with
    per-token rewards, and the token invariants (a broken one is the episode's error)."""
    episode = view.episode
    step_rewards = [s.reward for s in episode.steps]
    episode.final_reward = float(sum(step_rewards))
    metrics: dict[str, float] = {"turns": float(len(episode.steps))}
    for step in episode.steps:
        for name, value in step.reward_terms.items():
            metrics[f"reward/{name}"] = metrics.get(f"reward/{name}", 0.0) + value
    metrics["reward/env"] = episode.final_reward - sum(
        v for k, v in metrics.items() if k.startswith("reward/")
    )
    if view.outcome is not None:
        metrics["outcome"] = view.outcome
    episode.metrics = metrics
    tokens = view.tokens
    if tokens is None:
        return
    has_logprobs = episode.has_logprobs = tokens.has_logprobs and bool(view.spans)
    episode.segments = [TokenSegment.from_builder(b, has_logprobs) for b in tokens.segments]
    episode.segment_rewards = [
        rewards_array(r)
        for r in assign_token_rewards(
            reward_strategy,
            view.spans[: len(step_rewards)],
            step_rewards,
            episode.final_reward,
            [len(s) for s in tokens.segments],
        )
    ]
    if episode.ok:
        try:
            episode.check()
        except Exception as exc:  # noqa: BLE001 - logged and recorded on the episode
            episode.error = redact_text(f"{type(exc).__name__}: {exc}")
            logger.error("episode %s broke a token invariant: %s", episode.session_id, exc)
