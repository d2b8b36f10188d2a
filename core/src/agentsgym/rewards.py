"""Per-token reward strategies: how step rewards land on the tokens of a segment.

Env tokens get 0.0. ``spread`` (default) divides each step reward evenly over the
tokens of the action that earned it, ``last_token`` puts it on the action's last token,
``terminal`` divides the final reward over all agent tokens; all conserve reward
(``Episode.check``). Credit assignment (e.g. :func:`discounted_returns`) is a training
choice, so it lives in the trainers: as an env strategy a discount would sit in every
dataset row and break reward conservation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentsgym.config import RewardStrategyName
from agentsgym.tokenization import AgentSpan

__all__ = ["STRATEGIES", "RewardStrategy", "assign_token_rewards", "discounted_returns"]

Spans = Sequence[AgentSpan]
TokenRewards = list[list[float]]  # one list per segment
RewardStrategy = Callable[[Spans, Sequence[float], float, Sequence[int]], TokenRewards]


def _zeros(segment_lengths: Sequence[int]) -> TokenRewards:
    return [[0.0] * n for n in segment_lengths]


def spread(
    spans: Spans, step_rewards: Sequence[float], final_reward: float, segment_lengths: Sequence[int]
) -> TokenRewards:
    rewards = _zeros(segment_lengths)
    for span, reward in zip(spans, step_rewards):
        for pos in span.positions:
            rewards[span.segment][pos] += reward / len(span.positions)
    return rewards


def last_token(
    spans: Spans, step_rewards: Sequence[float], final_reward: float, segment_lengths: Sequence[int]
) -> TokenRewards:
    rewards = _zeros(segment_lengths)
    for span, reward in zip(spans, step_rewards):
        if span.positions:
            rewards[span.segment][span.positions[-1]] += reward
    return rewards


def terminal(
    spans: Spans, step_rewards: Sequence[float], final_reward: float, segment_lengths: Sequence[int]
) -> TokenRewards:
    rewards = _zeros(segment_lengths)
    total = sum(len(span.positions) for span in spans)
    for span in spans:
        for pos in span.positions:
            rewards[span.segment][pos] += final_reward / total
    return rewards


STRATEGIES: dict[str, RewardStrategy] = {
    "spread": spread,
    "last_token": last_token,
    "terminal": terminal,
}


def assign_token_rewards(
    strategy: RewardStrategyName,
    spans: Spans,
    step_rewards: Sequence[float],
    final_reward: float,
    segment_lengths: Sequence[int],
) -> TokenRewards:
    """Per-token rewards of each segment under ``strategy``."""
    return STRATEGIES[strategy](spans, step_rewards, final_reward, segment_lengths)


def discounted_returns(step_rewards: Sequence[float], gamma: float = 1.0) -> list[float]:
    """The return of every step: ``G_t = r_t + gamma * G_{t+1}``. With ``gamma=1`` each
    step is credited with everything that followed it (in an outcome-only episode,
    every turn gets the outcome)."""
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    returns = [0.0] * len(step_rewards)
    following = 0.0
    for index in range(len(step_rewards) - 1, -1, -1):
        following = float(step_rewards[index]) + gamma * following
        returns[index] = following
    return returns
