"""Replies as a real small model writes them (SmolLM2-135M-Instruct's, shortened): answers
without ``\\boxed{}``, rambling, replies cut at the length limit. Feedback quotes a clean
answer or says none was found; a cut reply's last number is never taken for an answer."""

from __future__ import annotations

from typing import Any

import pytest

import agentsgym
from agentsgym import AgentAction, ScriptedAgent
from agentsgym_classical.grading import Verdict
from agentsgym_classical.prompts import shown_answer

TASK = {
    "id": "t/0",
    "problem": "Noah has 84 coins and gets 34 more. How many now?",
    "answer": "118",
}
CUT = "To solve this problem, we need to break it down step by step. We know that 4"


def play(replies: list[Any], env_id: str = "classical/Arithmetic-v0", **config: Any) -> Any:
    env = agentsgym.make(env_id, env_config=config)
    batch = env.run_trial([TASK], ScriptedAgent(replies), 1)
    assert not batch.failed, batch.failed[0].error
    return batch.episodes[0]


def test_a_reply_cut_at_the_length_limit_is_not_graded_and_the_feedback_says_so() -> None:
    episode = play([AgentAction(text=CUT, truncated=True), "\\boxed{118}"])
    info = episode.steps[0].info
    assert info["status"] == "unparsed" and info["cut_off"] is True and info["answer"] is None
    feedback = episode.messages[2]["content"]
    assert feedback.startswith("Your reply was cut off at the length limit before a final answer")
    assert "\\boxed{}" in feedback and "4 is not correct" not in feedback
    assert episode.steps[1].info["correct"] is True


def test_a_cut_reply_that_already_boxed_its_answer_is_graded() -> None:
    text = "84 + 34 = 118, so the answer is \\boxed{118}. Let me double-check: 84 + 3"
    episode = play([AgentAction(text=text, truncated=True)])
    assert episode.steps[0].info["correct"] is True and "cut_off" not in episode.steps[0].info


def test_the_same_text_without_the_cut_is_graded_as_before() -> None:
    """The last number of a reply that ended on its own is its answer, boxed or not."""
    episode = play([CUT, "Noah has 84 + 34 = 118 coins now."])
    assert episode.steps[0].info["status"] == "wrong"
    assert episode.messages[2]["content"].startswith("4 is not correct")
    assert episode.steps[1].info["correct"] is True


def test_feedback_never_quotes_a_fragment() -> None:
    episode = play(["So he has \\(3) + 1\\) coins"])
    assert episode.steps[0].info["extracted"] == "3) + 1"  # what the grader's regex took
    feedback = episode.messages[2]["content"]
    assert feedback.startswith("1 is not correct")  # its value, not the fragment
    assert "3)" not in feedback


@pytest.mark.parametrize(
    ("extracted", "answer", "shown"),
    [
        ("\\frac{3}{4}", "3/4", "\\frac{3}{4}"),
        ("3) + 1", "1", "1"),
        ("3) + 1", "(((", None),
        ("x" * 41, "y" * 41, None),
        (None, "118", "118"),
        ("12\n13", None, None),
        (None, None, None),
    ],
)
def test_shown_answer_is_a_short_well_formed_expression_or_none(
    extracted: str | None, answer: str | None, shown: str | None
) -> None:
    verdict = Verdict(status="wrong", extracted=extracted, answer=answer)
    assert shown_answer(verdict) == shown


def test_a_wrong_answer_with_nothing_clean_to_quote_says_so() -> None:
    env = agentsgym.make("classical/Arithmetic-v0")
    from agentsgym_classical import prompts

    verdict = Verdict(status="wrong", extracted="3) + (", answer="((")
    text = prompts.feedback(verdict, env.instruction, 2)
    assert text.startswith("Your final answer is not correct.")


# ------------------------------------------------------------------ GuessTheNumber
GUESS = "agentsgym/GuessTheNumber-v0"


def play_guess(replies: list[Any]) -> Any:
    env = agentsgym.make(GUESS, env_config={"high": 10, "max_steps_per_episode": 3})
    batch = env.run_trial([{"target": 7}], ScriptedAgent(replies), 1)
    assert not batch.failed, batch.failed[0].error
    return batch.episodes[0]


@pytest.mark.parametrize("reply", ["I think the number is 7 because", "7"])
def test_a_number_without_brackets_is_not_a_guess(reply: str) -> None:
    episode = play_guess([reply, "[7]"])
    assert episode.steps[0].info == {"valid": False}
    assert "could not find a guess like [50]" in episode.messages[2]["content"]


def test_a_cut_reply_without_a_bracketed_guess_is_cut_off_not_a_guess() -> None:
    episode = play_guess([AgentAction(text="7", truncated=True), "[7]"])
    assert episode.steps[0].info["valid"] is False and episode.steps[0].info["cut_off"] is True
    assert episode.messages[2]["content"].startswith("Your reply was cut off at the length limit")
    assert episode.final_reward == 1.0


def test_a_cut_reply_with_a_bracketed_guess_counts() -> None:
    episode = play_guess([AgentAction(text="My guess is [7]. Because the hint", truncated=True)])
    assert episode.steps[0].info["guess"] == 7 and episode.final_reward == 1.0


# ------------------------------------------------------------------ QuickArithmetic
QUICK = "classical/QuickArithmetic-v0"


def test_quick_arithmetic_splits_are_disjoint_and_answers_right() -> None:
    env = agentsgym.make(QUICK, env_config={"operations": "+-*", "high": 5})
    train = [t["problem"] for t in env.get_train_dataset()["task_data"]]
    held_out = [t["problem"] for t in env.get_eval_dataset()["task_data"]]
    assert len(train) + len(held_out) == 3 * 25 and not set(train) & set(held_out)
    assert len(held_out) == round(75 * 0.25)
    for task in env.get_eval_dataset()["task_data"]:
        a, symbol, b = task["problem"].removeprefix("What is ").rstrip("?").split()
        value = {"+": int(a) + int(b), "-": int(a) - int(b), "×": int(a) * int(b)}[symbol]
        assert task["answer"] == str(value)


def test_quick_arithmetic_takes_the_number_only_and_one_attempt() -> None:
    env = agentsgym.make(QUICK)
    task = env.get_eval_dataset()["task_data"][0]
    a, _, b = task["problem"].removeprefix("What is ").rstrip("?").split()
    answer = str(int(a) + int(b))
    batch = env.run_trial([task], ScriptedAgent([answer]), 1)
    episode = batch.episodes[0]
    assert episode.final_reward == 1.0 and episode.num_turns == 1
    assert "Answer with the number only." in episode.messages[0]["content"]
    cut = env.run_trial([task], ScriptedAgent([AgentAction(text=answer, truncated=True)]), 1)
    assert cut.episodes[0].final_reward == 0.0 and cut.episodes[0].steps[0].info["cut_off"]


def test_quick_arithmetic_rejects_an_empty_range() -> None:
    with pytest.raises(agentsgym.errors.EnvConfigError, match="low"):
        agentsgym.make(QUICK, env_config={"low": 5, "high": 2})
