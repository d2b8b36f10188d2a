"""Per-token reward strategies: how step rewards land on the tokens of a segment.

Environment tokens always get 0.0. Strategies:

* ``spread`` (default): each step reward is divided evenly over the tokens of the
  agent action that earned it.
* ``last_token``: each step reward goes to the last token of that action.
* ``terminal``: the episode's final reward is divided evenly over all agent tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentsgym.config import RewardStrategyName
from agentsgym.tokenization import AgentSpan

RewardStrategy = Callable[[Sequence[AgentSpan], Sequence[float], float, Sequence[int]], list[list[float]]]


def _zeros(segment_lengths: Sequence[int]) -> list[list[float]]:
    return [[0.0] * n for n in segment_lengths]


def spread(
    spans: Sequence[AgentSpan], step_rewards: Sequence[float], final_reward: float,
    segment_lengths: Sequence[int],
) -> list[list[float]]:
    rewards = _zeros(segment_lengths)
    for span, reward in zip(spans, step_rewards):
        if span.positions:
            share = reward / len(span.positions)
            for pos in span.positions:
                rewards[span.segment][pos] += share
    return rewards


def last_token(
    spans: Sequence[AgentSpan], step_rewards: Sequence[float], final_reward: float,
    segment_lengths: Sequence[int],
) -> list[list[float]]:
    rewards = _zeros(segment_lengths)
    for span, reward in zip(spans, step_rewards):
        if span.positions:
            rewards[span.segment][span.positions[-1]] += reward
    return rewards


def terminal(
    spans: Sequence[AgentSpan], step_rewards: Sequence[float], final_reward: float,
    segment_lengths: Sequence[int],
) -> list[list[float]]:
    rewards = _zeros(segment_lengths)
    total = sum(len(span.positions) for span in spans)
    if total:
        share = final_reward / total
        for span in spans:
            for pos in span.positions:
                rewards[span.segment][pos] += share
    return rewards


STRATEGIES: dict[str, RewardStrategy] = {
    "spread": spread,
    "last_token": last_token,
    "terminal": terminal,
}


def assign_token_rewards(
    strategy: RewardStrategyName,
    spans: Sequence[AgentSpan],
    step_rewards: Sequence[float],
    final_reward: float,
    segment_lengths: Sequence[int],
) -> list[list[float]]:
    """Per-token rewards of each segment under ``strategy``."""
    return STRATEGIES[strategy](spans, step_rewards, final_reward, segment_lengths)
