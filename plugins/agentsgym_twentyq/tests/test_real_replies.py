"""Replies as a real small model writes them (SmolLM2-135M-Instruct's, shortened): statements
instead of questions, unbracketed guesses, replies cut at the length limit. Only a real
question reaches the gamemaster; otherwise the turn is used up and the player is told
what was missing."""

from __future__ import annotations

from typing import Any

import pytest

import agentsgym
from agentsgym import AgentAction, ScriptedAgent
from agentsgym_twentyq.game import CUT_OFF, NO_QUESTION
from agentsgym_twentyq.parsing import find_question
from twentyq_testutil import BASIC

RAMBLING = (
    "I'm here to help, and I'll wait for your next question. I'm not able to give you the "
    "final answer right now. I'm ready to help you solve this problem."
)
CUT = "The object is a plane! The game is played in 2 turns. The game ends when you get the"


@pytest.mark.parametrize(
    ("reply", "cut_off", "question"),
    [
        ("Good. Now: is it red? Or rather, is it blue?", False, "Or rather, is it blue?"),
        ("Is it an animal? I think it might be a", True, "Is it an animal?"),
        ("Tell me the first letter", False, "Tell me the first letter"),
        ("Does it fly.", False, "Does it fly"),
        ("Tell me the first letter", True, None),
        (RAMBLING, False, None),
        (CUT, True, None),
        ("a" * 201, False, None),
        ("<think>Is it big?</think>", False, None),
        ("", False, None),
    ],
)
def test_find_question(reply: str, cut_off: bool, question: str | None) -> None:
    assert find_question(reply, cut_off=cut_off) == question


def test_a_megabyte_statement_is_no_question_in_one_pass() -> None:
    assert find_question("I think " + "a" * 1_000_000) is None


def play(replies: list[Any]) -> Any:
    env = agentsgym.make(BASIC, env_config={"max_steps_per_episode": 4})
    batch = env.run_trial([{"solution": "kite", "seed": 0}], ScriptedAgent(replies), 1)
    assert not batch.failed, batch.failed[0].error
    return batch.episodes[0]


def test_a_statement_uses_its_turn_without_asking_the_gamemaster() -> None:
    episode = play([RAMBLING, "Is it a toy?", "[kite]"])
    first = episode.steps[0].info
    assert first["kind"] == "none" and "cut_off" not in first and "question" not in first
    assert episode.messages[2]["content"].startswith(f"Gamemaster: {NO_QUESTION}")
    assert episode.steps[1].info["kind"] == "question"
    history = episode.messages[4]["content"]
    assert "1. Q: Is it a toy?" in history and "I'm here to help" not in history
    assert episode.final_reward == 1.0 and episode.num_turns == 3


def test_a_reply_cut_before_its_question_is_told_so() -> None:
    episode = play([AgentAction(text=CUT, truncated=True), "[kite]"])
    assert episode.steps[0].info["kind"] == "none" and episode.steps[0].info["cut_off"] is True
    assert episode.messages[2]["content"].startswith(f"Gamemaster: {CUT_OFF}")
    assert episode.final_reward == 1.0


def test_an_unbracketed_guess_is_not_a_guess() -> None:
    episode = play(["The object is a kite! It flies in the wind.", "[kite]"])
    assert episode.steps[0].info["kind"] == "none"
    assert "wrap your guess in square brackets" in episode.messages[2]["content"]


def test_statements_still_count_against_the_turn_limit() -> None:
    episode = play([RAMBLING] * 4)
    assert episode.num_turns == 4 and episode.final_reward == 0.0
    assert [s.info["kind"] for s in episode.steps] == ["none"] * 4
