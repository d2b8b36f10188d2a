"""Whether a step had anything to learn from: groups with differing rewards, counted
in the step log by every trainer and summed in ``agentsgym train``'s summary."""

from __future__ import annotations

import json
from typing import Any

import pytest

import agentsgym
from agentsgym.agents import ScriptedAgent
from agentsgym.trainers import RolloutSource, StepMetrics, TrainResult
from agentsgym_trl import BatchTrainer
from agentsgym_trl.screening import reward_signal
from trainer_agents import ThinkingAgent

TINY = "agentsgym/tiny-chatml"
GUESS = "agentsgym/GuessTheNumber-v0"
# One guess out of three: an agent guessing 1, 2 and 3 in a group's three rollouts wins
# exactly one of them, whatever the hidden number.
ONE_GUESS = {"low": 1, "high": 3, "max_steps_per_episode": 1}


class Recording(BatchTrainer):
    """Trains nothing; reports a loss so that it reads like a trainer that learns."""

    def consume(self, batch: Any) -> dict[str, float]:
        return {"loss": 0.0}


def source(tasks_per_step: int = 2) -> RolloutSource:
    env = agentsgym.make(GUESS, tokenizer=TINY, env_config=ONE_GUESS)
    return RolloutSource(
        env.get_train_dataset(size=4), tokenizer=TINY, num_rollouts=3, tasks_per_step=tasks_per_step
    )


def test_reward_signal_counts_groups_whose_rewards_differ() -> None:
    assert reward_signal([[1.0, 1.0], [0.0, 1.0, 0.0], [], [0.5]]) == {
        "groups": 3.0,  # an empty group (every rollout failed) is no group
        "groups_with_signal": 1.0,
    }
    assert reward_signal([]) == {"groups": 0.0, "groups_with_signal": 0.0}


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        # guesses (task + rollout) % 3 + 1: each group guesses 1, 2 and 3, one wins
        (lambda: ThinkingAgent(agentsgym.load_tokenizer(TINY), high=3), 2.0),
        # every rollout guesses 1: a group wins all or nothing
        (lambda: ScriptedAgent(["[1]"]), 0.0),
    ],
)
def test_batch_trainers_log_the_groups_with_signal_of_every_step(
    agent: Any, expected: float
) -> None:
    result = Recording().train(source(), max_steps=2, agent=agent())
    assert [s.extra["groups"] for s in result.steps] == [2.0, 2.0]
    assert [s.extra["groups_with_signal"] for s in result.steps] == [expected, expected]


def test_trl_groups_are_the_rollouts_of_one_prompt() -> None:
    """TRL repeats each prompt once per generation and the adapter plays every entry
    as a group of one: the GRPO groups are the entries of one prompt."""
    from agentsgym_trl.trl_rollouts import rewards_by_prompt

    rows = source().rows[:2]
    prompts = [json.dumps(row.model_dump(), sort_keys=True) for row in rows for _ in range(3)]
    batch = source().play(
        [json.loads(p) for p in prompts],
        ThinkingAgent(agentsgym.load_tokenizer(TINY), high=3),
        num_rollouts=1,
    )
    grouped = rewards_by_prompt(prompts, batch)
    assert list(grouped) == [prompts[0], prompts[3]]
    assert all(len(rewards) == 3 for rewards in grouped.values())
    assert reward_signal(grouped.values())["groups"] == 2.0


def step(number: int, groups: int, with_signal: int, *, masked: int | None = None) -> StepMetrics:
    extra = {"groups": float(groups), "groups_with_signal": float(with_signal)}
    if masked is not None:
        extra["masked_rollouts"] = float(masked)
    return StepMetrics(step=number, loss=0.0, num_rollouts=8, extra=extra)


def test_the_summary_says_whether_any_step_had_signal() -> None:
    from agentsgym_trl.train_summary import RewardSignal

    flat = RewardSignal.of(TrainResult(steps=[step(1, 2, 0), step(2, 2, 0)]))
    assert flat.rows() == [("groups with differing rewards", "0 of 4 (in 0 of 2 steps)")]
    verdict = flat.verdict("agentsgym/GuessTheNumber-v0")
    assert verdict is not None and "no learning signal" in verdict
    assert "same reward" in verdict and "--warm-start guess-number" in verdict

    cut = RewardSignal.of(TrainResult(steps=[step(1, 2, 1, masked=8), step(2, 2, 0, masked=8)]))
    assert ("rollouts masked (a reply cut)", "16 of 16") in cut.rows()
    assert "--max-new-tokens" in (cut.verdict() or "")

    learning = RewardSignal.of(
        TrainResult(steps=[step(1, 2, 0, masked=0), step(2, 2, 1, masked=3)])
    )
    assert learning.rows()[0] == ("groups with differing rewards", "1 of 4 (in 1 of 2 steps)")
    assert learning.verdict() is None

    silent = RewardSignal.of(TrainResult(steps=[StepMetrics(step=1, loss=0.0)]))
    assert silent.rows() == [("groups with differing rewards", "not reported by this trainer")]
    assert silent.verdict() is None


def test_the_advice_without_signal_fits_the_env_in_hand() -> None:
    from agentsgym_trl.train_summary import RewardSignal

    flat = RewardSignal.of(TrainResult(steps=[step(1, 2, 0)]))
    tools = flat.verdict("tools/Calculator-v0") or ""
    # GuessTheNumber's warm start teaches "[k]" answers: no use for a calculator
    assert "guess-number" not in tools and "--warm-start" not in tools
    assert "at tools/Calculator-v0" in tools and "--model smollm2" in tools
    assert "more --num-rollouts" in tools
