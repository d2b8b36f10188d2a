"""Per-token reward strategies: how step rewards land on the tokens of a segment.

Environment tokens always get 0.0. Strategies:

* ``spread`` (default): each step reward is divided evenly over the tokens of the
  agent action that earned it.
* ``last_token``: each step reward goes to the last token of that action.
* ``terminal``: the episode's final reward is divided evenly over all agent tokens.

Every strategy conserves reward: the per-token rewards of an episode add up to its
final reward (``Episode.check`` holds the runner to it). They describe *data*: where
a reward was earned, as written to rollout files and read by any trainer.

Credit assignment (which turns a reward should reinforce) is a training choice, not
a property of the data, so it lives in the trainers: ``per-token-grpo`` computes
per-turn returns from the step rewards with :func:`discounted_returns`
(``credit_assignment="return_to_go"``, discount ``gamma``). A discount is a
hyperparameter one tunes between runs; as an env strategy it would sit in every
dataset row's ``env_config`` and break the conservation check above.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentsgym.config import RewardStrategyName
from agentsgym.tokenization import AgentSpan

RewardStrategy = Callable[
    [Sequence[AgentSpan], Sequence[float], float, Sequence[int]], list[list[float]]
]


def _zeros(segment_lengths: Sequence[int]) -> list[list[float]]:
    return [[0.0] * n for n in segment_lengths]


def spread(
    spans: Sequence[AgentSpan],
    step_rewards: Sequence[float],
    final_reward: float,
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
    spans: Sequence[AgentSpan],
    step_rewards: Sequence[float],
    final_reward: float,
    segment_lengths: Sequence[int],
) -> list[list[float]]:
    rewards = _zeros(segment_lengths)
    for span, reward in zip(spans, step_rewards):
        if span.positions:
            rewards[span.segment][span.positions[-1]] += reward
    return rewards


def terminal(
    spans: Sequence[AgentSpan],
    step_rewards: Sequence[float],
    final_reward: float,
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


def discounted_returns(step_rewards: Sequence[float], gamma: float = 1.0) -> list[float]:
    """The return of every step: ``G_t = r_t + gamma * G_{t+1}`` (the discounted sum
    of the rewards from step ``t`` to the end of the episode).

    With ``gamma=1`` every step is credited with everything that followed it, so in
    an outcome-only episode (one reward at the end) every turn gets the outcome.
    """
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    returns = [0.0] * len(step_rewards)
    following = 0.0
    for index in range(len(step_rewards) - 1, -1, -1):
        following = float(step_rewards[index]) + gamma * following
        returns[index] = following
    return returns
