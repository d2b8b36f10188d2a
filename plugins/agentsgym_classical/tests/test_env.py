"""The multi-step episode: attempts, feedback, rewards, penalty term, step info."""

from __future__ import annotations

from typing import Any

import pytest

import agentsgym
from agentsgym import ScriptedAgent

TASK = {"id": "t/0", "problem": "What is 6 * 7?", "answer": "42"}


def play(
    replies: list[str],
    task: dict[str, Any] = TASK,
    env_id: str = "classical/Arithmetic-v0",
    **config: Any,
) -> Any:
    env = agentsgym.make(env_id, env_config=config)
    batch = env.run_trial([task], ScriptedAgent(replies), 1)
    assert not batch.failed, batch.failed[0].error
    return batch.episodes[0]


def test_right_first_time() -> None:
    episode = play(["\\boxed{42}"])
    assert episode.num_turns == 1 and episode.final_reward == 1.0
    info = episode.steps[0].info
    assert info["correct"] is True and info["answer"] == "42" and info["attempt"] == 1


def test_wrong_answer_gets_feedback_and_another_attempt() -> None:
    episode = play(["\\boxed{41}", "\\boxed{42}"])
    assert episode.num_turns == 2
    feedback = episode.messages[2]["content"]
    assert feedback.startswith("41 is not correct") and "2 attempts left" in feedback
    assert "42" not in feedback  # the reference answer is never revealed
    assert [s.reward for s in episode.steps] == [0.0, pytest.approx(0.9)]
    assert episode.steps[1].reward_terms == {"attempt_penalty": -0.1}
    assert episode.metrics["reward/attempt_penalty"] == pytest.approx(-0.1)
    assert episode.final_reward == pytest.approx(0.9)


def test_unparseable_answer_gets_told_the_format() -> None:
    episode = play(["I think it is big.", "#### 42"])
    assert episode.steps[0].info["status"] == "unparsed"
    assert "could not find a final answer" in episode.messages[2]["content"]
    assert "\\boxed{}" in episode.messages[2]["content"]
    assert episode.steps[1].info["correct"] is True


def test_out_of_attempts_ends_the_episode() -> None:
    episode = play(["\\boxed{1}"], max_steps_per_episode=3)
    assert episode.num_turns == 3 and episode.steps[-1].done and not episode.truncated
    assert [s.info["correct"] for s in episode.steps] == [False, False, False]
    assert episode.final_reward == pytest.approx(-0.2)


def test_rewards_are_configurable() -> None:
    episode = play(
        ["no answer", "\\boxed{41}", "\\boxed{42}"],
        correct_reward=2.0,
        wrong_reward=-0.5,
        unparsed_reward=-1.0,
        attempt_penalty=0.25,
    )
    assert [s.reward for s in episode.steps] == [-1.0, -0.75, 1.75]


def test_single_attempt_and_custom_instruction() -> None:
    episode = play(["\\boxed{1}"], max_steps_per_episode=1, instruction="Answer as #### N.")
    assert episode.num_turns == 1 and episode.final_reward == 0.0
    assert episode.messages[0]["content"].endswith("Answer as #### N.\nYou have one attempt.")


def test_multiple_choice_episode() -> None:
    task = {
        "id": "t/1",
        "problem": "Pick 7.",
        "answer": "C",
        "choices": {"A": "4", "B": "6", "C": "7"},
    }
    episode = play(["\\boxed{A}", "It is (C)."], task, "classical/MultipleChoice-v0")
    assert episode.messages[0]["content"].startswith("Pick 7.\n\nOptions:\nA) 4\nB) 6\nC) 7")
    assert [s.info["answer"] for s in episode.steps] == ["A", "C"]
    assert episode.steps[-1].info["correct"] is True


def test_bad_task_data_fails_the_episode_with_a_clear_error() -> None:
    env = agentsgym.make("classical/Arithmetic-v0")
    batch = env.run_trial([{"problem": "no answer"}], ScriptedAgent(["1"]), 1)
    assert batch.failed and "answer" in batch.failed[0].error
