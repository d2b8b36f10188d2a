"""A gamemaster played by an agent: valid replies, fallbacks, and the registry path."""

from __future__ import annotations

from typing import Any

import pytest

import agentsgym
from agentsgym import AgentAction, FunctionAgent
from agentsgym_twentyq.agent_gamemaster import AgentGamemaster, read_answer
from agentsgym_twentyq.env import TwentyQuestionsEnv
from agentsgym_twentyq.gamemaster import DONT_KNOW, NO, YES, RulesGamemaster
from agentsgym_twentyq.questioner import ReferenceQuestioner
from agentsgym_twentyq.words import Secret
from twentyq_testutil import BASIC


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        ("Yes", YES),
        ("yes.", YES),
        ("**Yes**", YES),
        ("'No'", NO),
        ("No, it is not.", NO),
        ("The answer is: No", NO),
        ("I don't know", DONT_KNOW),
        ("I do not know.", DONT_KNOW),
        ("<think>yes? no?</think>\nNo", NO),
        ("Yes and no", None),
        ("banana", None),
        ("", None),
        ("Knowing the word, I would say nothing", None),  # no 'no' hiding in know/nothing
    ],
)
def test_read_answer(reply: str, answer: str | None) -> None:
    assert read_answer(reply) == answer


def test_agent_sees_textarenas_gamemaster_prompt() -> None:
    seen: list[list[dict[str, str]]] = []

    def policy(messages: list[dict[str, str]], state: Any) -> tuple[AgentAction, Any]:
        seen.append(messages)
        return AgentAction(text="Yes."), state

    gm = AgentGamemaster(FunctionAgent(policy))
    reply = gm.answer("Is it red?", Secret("apple", "thing"), [("Is it a thing?", "Yes")])
    assert (reply.answer, reply.fallback, reply.raw) == (YES, False, "Yes.")
    system, user = seen[0]
    assert "gamemaster for the game of '20 Questions'" in system["content"]
    assert "target word: apple" in system["content"] and "a thing" in system["content"]
    assert "Q: Is it a thing?\nA: Yes" in user["content"]
    assert user["content"].rstrip().endswith("Please respond with the most appropriate option.")
    assert "Options: 'Yes', 'No', 'I don't know'" in user["content"]


def test_an_unclear_reply_is_read_as_i_dont_know() -> None:
    # The gamemaster answered, just not clearly: that is its answer, and the game goes on.
    env = TwentyQuestionsEnv(gamemaster=FunctionAgent(lambda m, s: ("Perhaps, it is a fruit", s)))
    batch = env.run_trial([{"solution": "apple", "seed": 0}], ReferenceQuestioner(), 1)
    assert not batch.failed
    episode = batch.episodes[0]
    questions = [s.info for s in episode.steps if s.info["kind"] == "question"]
    assert questions and all(
        i["gamemaster_answer"] == DONT_KNOW and i["gamemaster_fallback"] for i in questions
    )
    assert "not clearly one of" in questions[0]["gamemaster_error"]
    answers = [m["content"] for m in episode.messages[1:] if m["role"] == "user"]
    assert answers and all(a.startswith("Gamemaster: I don't know\n") for a in answers)


def test_registered_agent_by_name_through_env_config() -> None:
    # "scripted" is a core agent; it always gives its first reply to a fresh conversation.
    env = agentsgym.make(
        BASIC, env_config={"gamemaster": "scripted", "gamemaster_options": {"replies": ["No"]}}
    )
    state = env.hook.initialize_episode(env=env, session_id="s", task_data={"solution": "apple"})
    question = "Is it a thing?"
    result = env.hook.step_episode(
        env=env, state=state, action=question, step=0, reply=AgentAction(text=question)
    )
    assert result.info["gamemaster_answer"] == NO and result.info["gamemaster_fallback"] is False


def test_a_model_like_gamemaster_lets_the_questioner_win() -> None:
    rules = RulesGamemaster()

    def chatty(messages: list[dict[str, str]], state: Any) -> tuple[str, Any]:
        word = messages[0]["content"].split("target word: ")[1].split("\n")[0]
        question = messages[1]["content"].split("Q: ")[-1].split("\nOptions")[0]
        answer = rules.answer(question, Secret(word, "thing"), []).answer
        return f"<think>checking</think>**{answer}**, that is my answer.", state

    env = agentsgym.make(BASIC)
    env.use_gamemaster(FunctionAgent(chatty))
    batch = env.run_trial(
        [{"solution": w, "seed": 0} for w in ("yo-yo", "apple", "ice cream")],
        ReferenceQuestioner(),
        1,
    )
    assert [e.final_reward for e in batch.episodes] == [1.0, 1.0, 1.0]
    assert not any(s.info.get("gamemaster_fallback") for e in batch.episodes for s in e.steps)


def test_token_in_agents_answer_from_the_messages() -> None:
    class TokenIn:
        wants_prompt_token_ids = True

        def __init__(self) -> None:
            self.given: list[Any] = []

        def get_action(self, messages: Any, state: Any, prompt_token_ids: Any = None) -> Any:
            self.given.append(prompt_token_ids)
            return "Yes", state

    agent = TokenIn()
    reply = AgentGamemaster(agent).answer("Is it a place?", Secret("paris", "place"))
    assert reply.answer == "Yes" and not reply.fallback
    assert agent.given == [None]  # the gamemaster has no token stream: the agent renders
    with pytest.raises(TypeError, match="get_action"):
        AgentGamemaster(object())


def test_api_keys_stay_out_of_dataset_rows() -> None:
    env = TwentyQuestionsEnv(
        env_config={
            "gamemaster": "openai",
            "gamemaster_options": {"base_url": "http://x/v1", "api_key": "sk-secret"},
        },
        gamemaster=FunctionAgent(lambda m, s: ("Yes", s)),
    )
    row = env.get_eval_dataset()[0]
    assert row["env_config"]["gamemaster_options"] == {"base_url": "http://x/v1"}
    assert "sk-secret" not in str(env.get_train_dataset().to_list())
