"""Guess parsing, and that every word of both lists can be won."""

from __future__ import annotations

from typing import Any

import pytest

from agentsgym import AgentAction
from agentsgym_twentyq.parsing import extract_question, is_correct, parse_guess
from agentsgym_twentyq.words import word_list


@pytest.mark.parametrize(
    ("reply", "guess"),
    [
        ("[apple]", "apple"),
        ("I am fairly sure now. My final answer is [Apple]!", "Apple"),
        ("[yo-yo]", "yo-yo"),
        ("Is it... [ ice cream ]", "ice cream"),
        ("[TV presenter]", "TV presenter"),
        ("[rock 'n' roll]", "rock 'n' roll"),
        ("[globe\u2013trotting trunk]", "globe-trotting trunk"),  # en dash
        ("First [car], no wait: [bus]", "bus"),  # the last guess counts
        ("<think>maybe [car]?</think> Is it red?", None),  # thoughts are not moves
        ("Does it contain the letter 'e'?", None),
        ("[42]", None),
        ("[yes/no] Is it alive?", None),
        ("", None),
    ],
)
def test_parse_guess(reply: str, guess: str | None) -> None:
    assert parse_guess(reply) == guess


@pytest.mark.parametrize(
    ("guess", "solution", "correct"),
    [
        ("APPLE", "apple", True),
        ("yo yo", "yo-yo", True),
        ("tv presenter", "TV presenter", True),
        ("the lighthouse", "lighthouse", True),
        ("globe trotting  trunk", "globe-trotting trunk", True),
        ("elephant", "ant", False),  # TextArena's substring test would call this right
        ("apples", "apple", False),
        ("ice", "ice cream", False),
    ],
)
def test_is_correct(guess: str, solution: str, correct: bool) -> None:
    assert is_correct(guess, solution) is correct


def test_question_is_the_last_sentence_asking_something() -> None:
    assert (
        extract_question("Good. Now: is it red? Or rather, is it blue?") == "Or rather, is it blue?"
    )
    assert (
        extract_question("<think>Hmm?</think>Tell me the first letter")
        == "Tell me the first letter"
    )


def _play_guess(env: Any, word: str, reply: str) -> tuple[float, bool, dict[str, Any]]:
    state = env.hook.initialize_episode(
        env=env, session_id="s", task_data={"solution": word, "seed": 0}
    )
    result = env.hook.step_episode(
        env=env, state=state, action=reply, step=0, reply=AgentAction(text=reply)
    )
    return result.reward, result.done, result.info


@pytest.mark.parametrize("level", ["basic", "hardcore"])
def test_every_word_is_winnable(level: str, basic_env: Any, hardcore_env: Any) -> None:
    env = basic_env if level == "basic" else hardcore_env
    for secret in word_list(level):  # type: ignore[arg-type]
        word = secret.word
        for reply in (f"[{word}]", f"My guess: [{word.upper()}].", f"[{word.replace('-', ' ')}]"):
            reward, done, info = _play_guess(env, word, reply)
            assert (reward, done, info["correct"]) == (1.0, True, True), (word, reply, info)


def test_a_wrong_guess_ends_the_episode_with_zero(basic_env: Any) -> None:
    reward, done, info = _play_guess(basic_env, "ant", "[elephant]")
    assert (reward, done, info["kind"], info["correct"]) == (0.0, True, "guess", False)
