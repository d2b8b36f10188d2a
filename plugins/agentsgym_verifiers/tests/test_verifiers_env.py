"""verifiers tasksets played by agentsgym: verifiers' own env server runs the rollout,
agentsgym's gateway records the model's tokens, the taskset's rubric gives the reward."""

from __future__ import annotations

import re
from typing import Any

import pytest

import agentsgym
from agentsgym.testing import check_padded_rows
from agentsgym_serve import BackgroundServer, create_app
from verifiers_fixtures import TOKENIZER, bisect_guess_the_number, env_config, scripted_model

pytestmark = pytest.mark.timeout(1800)  # the first test may build verifiers' venv

NULL_HARNESS = {"harness": {"id": "null"}}


def _sum_of(messages: list[dict[str, Any]]) -> str:
    """The right answer to "What is a + b?", and a wrong one to "What is 2 + 2?"."""
    a, b = map(int, re.findall(r"\d+", messages[-1]["content"])[:2])
    return "5" if (a, b) == (2, 2) else str(a + b)


def _addition_env(python: str, server: Any, num_tasks: int) -> Any:
    """The docs' addition taskset, played by the null harness (a plain chat loop)."""
    return agentsgym.make(
        "verifiers://addition_v1",
        tokenizer=TOKENIZER,
        env_config=env_config(
            python, server, taskset={"num_tasks": num_tasks}, env={"agent": NULL_HARNESS}
        ),
    )


def _episodes(batch: Any) -> list[Any]:
    return [episode for group in batch.groups for episode in group.episodes]


def _audit(episode: Any, env: Any, conversation: list[dict[str, Any]]) -> None:
    """One exchange: the episode's tokens are the prompt the model was conditioned on
    (the template's rendering of what verifiers sent), then exactly the tokens it
    sampled (the reply and its end-of-turn token), the mask on those alone, then what
    the template writes after the final reply (ChatML's newline), as context."""
    assert episode.ok, episode.error
    episode.check()
    assert [(m["role"], m["content"]) for m in episode.messages] == [
        (m["role"], m["content"]) for m in conversation
    ]
    tokenizer = env.tokenizer
    prompt = tokenizer.apply_chat_template(
        conversation[:-1], tokenize=False, add_generation_prompt=True
    )
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    reply_ids = tokenizer(conversation[-1]["content"], add_special_tokens=False)["input_ids"]
    sampled = [*reply_ids, tokenizer.convert_tokens_to_ids("<|im_end|>")]
    closing = tokenizer("\n", add_special_tokens=False)["input_ids"]
    assert episode.full_token_ids == [*prompt_ids, *sampled, *closing]
    mask = [0] * len(prompt_ids) + [1] * len(sampled) + [0] * len(closing)
    assert episode.agent_token_mask == mask
    assert {step.token_source for step in episode.steps} == {"server"}


def test_a_taskset_written_as_verifiers_docs_say(verifiers_python_path: str) -> None:
    with scripted_model(_sum_of) as server:
        env = _addition_env(verifiers_python_path, server, num_tasks=4)
        try:
            dataset = env.get_train_dataset()
            tasks = [row["task_data"] for row in dataset]
            assert [t["prompt"] for t in tasks] == [f"What is {i} + {i}?" for i in range(4)]
            batch = env.run_trial(tasks[1:3], num_rollouts=2)
        finally:
            env.close()
    check_padded_rows(batch, env.chat.pad_token_id)
    episodes = _episodes(batch)
    assert len(episodes) == 4
    for episode in episodes:
        i = episode.task_data["idx"]
        answer = "5" if i == 2 else str(2 * i)
        conversation = [
            {"role": "user", "content": f"What is {i} + {i}?"},
            {"role": "assistant", "content": answer},
        ]
        _audit(episode, env, conversation)
        reward = 0.0 if i == 2 else 1.0  # the rubric's exact_match: 2 + 2 is not 5
        assert episode.final_reward == reward
        assert episode.metrics["verifiers/exact_match"] == reward
        assert sum(episode.per_token_rewards) == pytest.approx(reward)


def test_the_openenv_taskset_of_verifiers_plays_an_agentsgym_server(
    verifiers_python_path: str,
) -> None:
    """verifiers' built-in openenv taskset, several turns: the game served by
    ``agentsgym serve`` (OpenEnv's protocol), the model bisecting."""

    app = create_app("agentsgym/GuessTheNumber-v0")
    with BackgroundServer(app) as game, scripted_model(bisect_guess_the_number) as server:
        env = agentsgym.make(
            "verifiers://openenv",
            tokenizer=TOKENIZER,
            env_config=env_config(
                verifiers_python_path,
                server,
                taskset={"base_url": game.url, "resets": [{"seed": 3}, {"seed": 4}]},
                env={"player": {**NULL_HARNESS, "max_turns": 12}},
            ),
        )
        try:
            tasks = [row["task_data"] for row in env.get_train_dataset()]
            batch = env.run_trial(tasks, num_rollouts=1)
        finally:
            env.close()
    episodes = _episodes(batch)
    assert len(episodes) == 2
    for episode in episodes:
        assert episode.ok, episode.error
        episode.check()
        assert episode.num_turns >= 2  # a game of several guesses
        assert episode.metrics["sampled_token_share"] == 1.0
        assert len(episode.segments) == 1  # each call extended the last one
        # GuessTheNumber's win is worth 1.0; verifiers sums the steps' rewards
        assert episode.final_reward == pytest.approx(1.0)
        assert episode.metrics["verifiers/openenv_reward"] == pytest.approx(1.0)


def test_a_failed_rollout_is_an_episode_error_not_a_crash(verifiers_python_path: str) -> None:
    """A model server that fails every call: verifiers records the failure, the episode
    says so, the run goes on."""

    def refuse(messages: list[dict[str, Any]]) -> str:
        raise RuntimeError("the model is down")

    with scripted_model(refuse) as server:
        env = _addition_env(verifiers_python_path, server, num_tasks=1)
        try:
            batch = env.run_trial([{"idx": 0, "prompt": "What is 0 + 0?", "answer": 0}])
        finally:
            env.close()
    (episode,) = batch.failed
    assert not episode.ok
    assert "verifiers reports the rollout failed" in episode.error
    assert "500" in episode.error  # the model server's answer, as verifiers recorded it


def test_the_model_of_the_run_is_the_agent(verifiers_python_path: str) -> None:
    """No backend: the gateway answers with the run's own agent (the tiny model, as
    ``--agent transformers`` and the trainers' policy do), token for token."""
    pytest.importorskip("torch", reason="the tiny model needs torch (agentsgym-trl)")
    env = _addition_env(verifiers_python_path, None, num_tasks=2)
    agent = agentsgym.make_agent("transformers", model="tiny", max_new_tokens=6)
    try:
        tasks = [row["task_data"] for row in env.get_train_dataset()]
        batch = env.run_trial(tasks, agent, num_rollouts=2)
    finally:
        env.close()
    check_padded_rows(batch, env.chat.pad_token_id)
    for episode in _episodes(batch):
        assert episode.ok, episode.error
        episode.check()
        assert episode.metrics["sampled_token_share"] == 1.0
        assert episode.final_reward == episode.metrics["verifiers/exact_match"]
