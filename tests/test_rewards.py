"""Per-token reward strategies, by hand-computed values."""

from __future__ import annotations

import pytest

import agentsgym
from agentsgym.rewards import assign_token_rewards, discounted_returns
from agentsgym.tokenization import AgentSpan
from envs_for_tests import CountdownEnv, CountingAgent

SPANS = [AgentSpan(0, [2, 3]), AgentSpan(0, [6, 7, 8, 9])]


def test_spread_divides_each_step_reward_over_its_action() -> None:
    rewards = assign_token_rewards("spread", SPANS, [1.0, 2.0], 3.0, [11])
    assert rewards == [[0, 0, 0.5, 0.5, 0, 0, 0.5, 0.5, 0.5, 0.5, 0]]


def test_last_token_puts_each_step_reward_on_the_action_end() -> None:
    rewards = assign_token_rewards("last_token", SPANS, [1.0, 2.0], 3.0, [11])
    assert rewards == [[0, 0, 0, 1.0, 0, 0, 0, 0, 0, 2.0, 0]]


def test_terminal_spreads_the_final_reward_over_all_agent_tokens() -> None:
    rewards = assign_token_rewards("terminal", SPANS, [1.0, 2.0], 3.0, [11])
    assert rewards == [[0, 0, 0.5, 0.5, 0, 0, 0.5, 0.5, 0.5, 0.5, 0]]
    uneven = assign_token_rewards("terminal", SPANS, [0.0, 0.0], 1.2, [11])
    assert uneven[0][2] == pytest.approx(0.2) and uneven[0][9] == pytest.approx(0.2)


@pytest.mark.parametrize("strategy", ["spread", "last_token", "terminal"])
def test_strategies_in_an_episode_keep_env_tokens_at_zero(strategy: str) -> None:
    env = CountdownEnv(
        tokenizer=agentsgym.load_tokenizer("agentsgym/tiny-chatml"),
        env_config={"reward_strategy": strategy},
    )
    episode = env.run_trial([{"start": 2}], CountingAgent()).episodes[0]
    rewards, mask = episode.per_token_rewards, episode.agent_token_mask
    assert all(r == 0.0 for r, m in zip(rewards, mask) if m == 0)
    assert sum(rewards) == pytest.approx(episode.final_reward)
    last_agent = max(i for i, m in enumerate(mask) if m)
    if strategy == "last_token":
        assert rewards[last_agent] == pytest.approx(1.5)  # the final step: 0.5 + 1.0 bonus
        assert sum(1 for r in rewards if r) == 2


def test_discounted_returns_credit_each_step_with_what_follows_it() -> None:
    assert discounted_returns([0.0, 0.0, 1.0]) == [1.0, 1.0, 1.0]
    assert discounted_returns([0.0, 0.0, 1.0], 0.5) == [0.25, 0.5, 1.0]
    assert discounted_returns([1.0, -0.5, 2.0], 0.9) == pytest.approx(
        [1.0 - 0.5 * 0.9 + 2.0 * 0.81, -0.5 + 2.0 * 0.9, 2.0]
    )
    assert discounted_returns([1.0, 2.0], 0.0) == [1.0, 2.0]  # immediate rewards only
    assert discounted_returns([]) == []
    with pytest.raises(ValueError, match="gamma"):
        discounted_returns([1.0], 1.5)
