"""The reference questioner against the rules gamemaster, on every word of both lists."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import agentsgym
from agentsgym_twentyq.questioner import ReferenceQuestioner
from agentsgym_twentyq.words import word_list
from twentyq_testutil import BASIC, HARDCORE

logger = logging.getLogger(__name__)


@pytest.mark.parametrize(("env_id", "level"), [(BASIC, "basic"), (HARDCORE, "hardcore")])
def test_win_rate_on_every_word(env_id: str, level: str) -> None:
    env = agentsgym.make(env_id)
    tasks = [{"solution": s.word, "seed": i} for i, s in enumerate(word_list(level))]  # type: ignore[arg-type]
    batch = env.run_trial(tasks, ReferenceQuestioner(), 1)
    assert not batch.failed
    episodes = batch.episodes
    wins = sum(e.final_reward for e in episodes)
    rate = wins / len(episodes)
    longest = max(e.num_turns for e in episodes)
    logger.info(
        "%s: %d/%d won (%.1f%%), at most %d turns", level, wins, len(episodes), 100 * rate, longest
    )
    assert len(episodes) == len(tasks)
    assert rate >= 0.95, [e.task_data["solution"] for e in episodes if e.final_reward < 1]
    assert longest < env.config.max_steps_per_episode


def test_it_uses_the_gamemasters_answers() -> None:
    """Against a gamemaster that knows nothing it can only guess at the very end."""
    env = agentsgym.make(BASIC)
    env.use_gamemaster(agentsgym.FunctionAgent(lambda m, s: ("I don't know", s)))
    episode = env.run_trial([{"solution": "yo-yo", "seed": 0}], ReferenceQuestioner(), 1).episodes[
        0
    ]
    assert episode.num_turns == env.config.max_steps_per_episode
    assert episode.steps[-1].info["kind"] == "guess"


def test_candidates_follow_the_answers() -> None:
    player = ReferenceQuestioner()
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": "You are playing 20 Questions (Hardcore).\n"
            "This object is related to people.\nTurn 1 of 21",
        },
        {"role": "assistant", "content": "Does it start with the letter 'c'?"},
        {"role": "user", "content": "Gamemaster: Yes\nTurn 2 of 21"},
        {"role": "assistant", "content": "Does it contain the letter 'g'?"},
        {"role": "user", "content": "Gamemaster: No\nTurn 3 of 21"},
        {"role": "assistant", "content": "Is it alive?"},  # not understood: ignored
        {"role": "user", "content": "Gamemaster: I don't know\nTurn 4 of 21"},
    ]
    words = {s.word for s in player.candidates(messages)}
    # hardcore people starting with c, without a g (cartographer, cosmologist, ... are out)
    assert words == {
        "chiropractor",
        "clairvoyant",
        "coroner",
        "carnival barker",
        "cobbler",
        "cartomancer",
    }
    # on the last turn it guesses a candidate
    messages[-1] = {
        "role": "user",
        "content": "Gamemaster: I don't know\nTurn 21 of 21. You have run out of questions.",
    }
    reply, _ = player.get_action(messages, None)
    assert reply.startswith("My guess is [") and reply[13:-2] in words
