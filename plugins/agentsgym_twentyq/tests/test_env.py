"""The episode hooks: prompts, the turn limit, rewards, config and task_data."""

from __future__ import annotations

from typing import Any

import pytest

import agentsgym
from agentsgym import RewardTerm, ScriptedAgent, hookimpl
from agentsgym.errors import DatasetRowError, EnvConfigError
from agentsgym_twentyq.env import TwentyQuestionsEnv
from agentsgym_twentyq.questioner import ReferenceQuestioner
from twentyq_testutil import BASIC, HARDCORE


def play(env: Any, agent: Any, task: dict[str, Any]) -> Any:
    batch = env.run_trial([task], agent, 1)
    assert not batch.failed, batch.failed[0].error
    return batch.episodes[0]


def test_registered_defaults_map_hardcore_and_the_turn_limit() -> None:
    basic, hard = agentsgym.make(BASIC), agentsgym.make(HARDCORE)
    assert (basic.config.hardcore, hard.config.hardcore) == (False, True)
    assert basic.config.max_steps_per_episode == 21  # TextArena's max_turns default
    state = hard.hook.initialize_episode(
        env=hard, session_id="s", task_data={"solution": "sextant", "seed": 0}
    )
    assert state.ta_state.max_turns == 21
    assert state.secret.category == "thing"
    env = agentsgym.make(BASIC, env_config={"max_steps_per_episode": 5})
    state = env.hook.initialize_episode(env=env, session_id="s", task_data={"solution": "apple"})
    assert state.ta_state.max_turns == 5


def test_prompts_show_rules_history_and_turn_count(basic_env: Any) -> None:
    episode = play(basic_env, ReferenceQuestioner(), {"solution": "yo-yo", "seed": 1})
    rules = episode.messages[0]["content"]
    assert "20 Questions (Basic)" in rules and "related to things" in rules
    assert "square brackets" in rules and "21 turns" in rules and "Turn 1 of 21" in rules
    third = [m for m in episode.messages if m["role"] == "user"][3]["content"]
    questions = [m["content"] for m in episode.messages if m["role"] == "assistant"][:3]
    assert third.startswith("Gamemaster: ")
    for number, question in enumerate(questions, start=1):
        assert f"{number}. Q: {question} A: " in third
    assert "Turn 4 of 21: 3 questions asked, 17 left" in third
    assert episode.final_reward == 1.0 and episode.steps[-1].info["correct"] is True


def test_history_can_be_left_out() -> None:
    env = agentsgym.make(BASIC, env_config={"show_history": False})
    episode = play(env, ReferenceQuestioner(), {"solution": "yo-yo", "seed": 1})
    later = [m["content"] for m in episode.messages if m["role"] == "user"][3]
    assert "History:" not in later and later.startswith("Gamemaster: ")


def test_running_out_of_turns_ends_with_zero_exactly_at_the_limit() -> None:
    env = agentsgym.make(BASIC, env_config={"max_steps_per_episode": 4})
    episode = play(env, ScriptedAgent(["Is it a place?"]), {"solution": "apple", "seed": 0})
    assert episode.num_turns == 4 and not episode.truncated  # the game ended it, not the runner
    assert [s.done for s in episode.steps] == [False, False, False, True]
    assert episode.final_reward == 0.0
    assert episode.steps[-1].info["reason"] == "The turn limit has been reached"
    assert "run out of questions" in episode.messages[-2]["content"]


def test_a_guess_on_the_last_turn_still_wins() -> None:
    env = agentsgym.make(BASIC, env_config={"max_steps_per_episode": 3})
    episode = play(
        env, ScriptedAgent(["Is it a place?", "Is it a thing?", "[apple]"]), {"solution": "apple"}
    )
    assert (episode.num_turns, episode.final_reward) == (3, 1.0)


def test_seed_alone_picks_a_word_deterministically(basic_env: Any) -> None:
    picks = {
        seed: basic_env.hook.initialize_episode(
            env=basic_env, session_id="s", task_data={"seed": seed}
        ).secret
        for seed in range(20)
    }
    again = basic_env.hook.initialize_episode(
        env=basic_env, session_id="t", task_data={"seed": 7}
    ).secret
    assert again == picks[7]
    assert len({s.word for s in picks.values()}) > 10


def test_custom_words_and_bad_task_data(basic_env: Any) -> None:
    state = basic_env.hook.initialize_episode(
        env=basic_env, session_id="s", task_data={"solution": "gizmo", "category": "thing"}
    )
    assert "related to things" in basic_env.hook.format_prompt(env=basic_env, state=state, step=0)
    unknown = basic_env.hook.initialize_episode(
        env=basic_env, session_id="s", task_data={"solution": "gizmo"}
    )
    assert unknown.secret.category is None
    assert "related to" not in basic_env.hook.format_prompt(env=basic_env, state=unknown, step=0)
    for bad in (
        {"solution": "r2-d2"},
        {"solution": ""},
        {"solution": "gizmo", "category": "animal"},
    ):
        with pytest.raises(DatasetRowError):
            basic_env.hook.initialize_episode(env=basic_env, session_id="s", task_data=bad)


def test_steps_do_not_change_the_state_they_were_given(basic_env: Any) -> None:
    seen: list[int] = []

    class TurnsBefore:
        @hookimpl
        def reward_shaping(self, state: Any, action: str, step_result: Any) -> RewardTerm | None:
            seen.append(state.turns_taken)
            return None

    env = agentsgym.make(BASIC, plugins=[TurnsBefore()])
    episode = play(env, ReferenceQuestioner(), {"solution": "apple", "seed": 0})
    assert seen == list(range(episode.num_turns))


@pytest.mark.parametrize(
    "config",
    [
        {"hardcore": "maybe"},
        {"max_steps_per_episode": 0},
        {"gamemaster_options": {"model": "x"}},  # options without an agent gamemaster
        {"gamemaster": "no-such-agent"},
        {"solution": "apple"},  # task data does not belong in env_config
    ],
)
def test_bad_env_config_is_rejected(config: dict[str, Any]) -> None:
    with pytest.raises(EnvConfigError):
        agentsgym.make(BASIC, env_config=config)


def test_env_class_builds_directly_without_the_registry() -> None:
    env = TwentyQuestionsEnv(env_config={"hardcore": True})
    assert env.level == "hardcore"
    assert env.env_id == "agentsgym_twentyq.env:TwentyQuestionsEnv"
