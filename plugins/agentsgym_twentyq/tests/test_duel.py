"""twentyq/TwentyQuestions-v0-duel: the gamemaster is a role an agent plays, rewarded
for agreeing with the offline oracle; the questioner's game is the single-agent one."""

from __future__ import annotations

from typing import Any

import pytest

import agentsgym
from agentsgym import ScriptedAgent
from agentsgym.testing import check_env

DUEL = "twentyq/TwentyQuestions-v0-duel"


@pytest.fixture(scope="module")
def tasks() -> list[dict[str, Any]]:
    return agentsgym.make("twentyq/TwentyQuestions-v0").get_eval_dataset()["task_data"][:3]


def by_role(batch: Any, role: str) -> list[Any]:
    return [e for e in batch.all_episodes if e.role == role]


def test_with_the_oracle_as_gamemaster_the_questioner_plays_the_single_agent_game(
    tasks: list[dict[str, Any]],
) -> None:
    duel = agentsgym.make(DUEL).run_trial(tasks, agentsgym.make_agent("twentyq/duel-reference"))
    solo = agentsgym.make("twentyq/TwentyQuestions-v0").run_trial(
        tasks, agentsgym.make_agent("twentyq/reference-questioner")
    )
    questioners = by_role(duel, "questioner")
    assert [e.messages for e in questioners] == [e.messages for e in solo.all_episodes]
    assert [e.final_reward for e in questioners] == [e.final_reward for e in solo.all_episodes]
    for gamemaster in by_role(duel, "gamemaster"):
        assert gamemaster.final_reward == 1.0  # every checked answer agrees with the oracle
        assert gamemaster.messages[0]["role"] == "system"
        assert all(step.info["agrees"] in (True, None) for step in gamemaster.steps)


def test_a_gamemaster_that_always_says_yes_disagrees_and_misleads(
    tasks: list[dict[str, Any]],
) -> None:
    env = agentsgym.make(DUEL, env_config={"max_steps_per_episode": 9})
    players = {
        "questioner": agentsgym.make_agent("twentyq/reference-questioner"),
        "gamemaster": ScriptedAgent("Yes."),
    }
    batch = env.run_trial(tasks[:1], players)
    (questioner,), (gamemaster,) = by_role(batch, "questioner"), by_role(batch, "gamemaster")
    checked = [s.info for s in gamemaster.steps if s.info["agrees"] is not None]
    agreed = sum(info["agrees"] for info in checked)
    assert checked and agreed < len(checked)
    assert gamemaster.final_reward == pytest.approx(agreed / len(checked))
    assert questioner.messages[2]["content"].startswith("Gamemaster: Yes")
    assert questioner.num_turns == 5 and gamemaster.num_turns == 4  # 9 actions: 5 + 4


def test_the_questioner_alone_trains_against_a_frozen_gamemaster(
    tasks: list[dict[str, Any]],
) -> None:
    env = agentsgym.make(DUEL, env_config={"trainable_roles": ["questioner"]})
    batch = env.run_trial(tasks[:2], agentsgym.make_agent("twentyq/duel-reference"), 2)
    assert [g.role for g in batch.groups] == ["questioner", "questioner"]
    with pytest.raises(agentsgym.errors.EnvConfigError):
        agentsgym.make(DUEL, env_config={"trainable_roles": "questioner"})


def test_each_role_has_its_own_token_stream() -> None:
    tokenizer = agentsgym.load_tokenizer("smollm2")
    env = agentsgym.make(DUEL, tokenizer=tokenizer, env_config={"max_steps_per_episode": 7})
    batch = env.run_trial([{"seed": 3}], agentsgym.make_agent("twentyq/duel-reference"))
    for episode in batch.all_episodes:
        episode.check()
        rendered = tokenizer.apply_chat_template(episode.messages, tokenize=False)
        assert tokenizer.decode(episode.full_token_ids) == rendered


def test_the_duel_passes_check_env() -> None:
    report = check_env(DUEL, num_tasks=1, tokenizer=None, env_config={"max_steps_per_episode": 7})
    assert report.passed, report


def test_each_role_reports_its_own_answer(tasks: list[dict[str, Any]]) -> None:
    """eval's cons@k votes on ``info["answer"]``: the questioner's is the word it
    guessed, the gamemaster's its reply; a question's answer is ``gamemaster_answer``."""
    batch = agentsgym.make(DUEL).run_trial(
        tasks[:2], agentsgym.make_agent("twentyq/duel-reference")
    )
    for questioner in by_role(batch, "questioner"):
        *questions, guess = [step.info for step in questioner.steps]
        assert all("answer" not in info for info in questions)
        assert guess["kind"] == "guess" and guess["answer"] == guess["guess"].lower()
    for gamemaster in by_role(batch, "gamemaster"):
        infos = [step.info for step in gamemaster.steps]
        assert infos and all(i["answer"] == i["gamemaster_answer"] for i in infos)
        assert {i["answer"] for i in infos} <= {"Yes", "No", "I don't know"}
    solo = agentsgym.make("twentyq/TwentyQuestions-v0").run_trial(
        tasks[:1], agentsgym.make_agent("twentyq/reference-questioner")
    )
    *questions, guess = [step.info for step in solo.episodes[0].steps]
    assert all("answer" not in i and "gamemaster_answer" in i for i in questions)
    assert guess["answer"] == guess["guess"].lower()
