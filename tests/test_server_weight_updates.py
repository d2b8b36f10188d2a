"""The loopback model server takes new weights and reports the version of every reply;
the ``openai`` agent records it on each turn (issue 30)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
torch = pytest.importorskip("torch")

import httpx

import agentsgym
from agentsgym_serve.model_server import OpenAICompatServer, ScriptedPolicy
from agentsgym_trl import ModelPolicy

TINY = "agentsgym/tiny-chatml"
GUESS = "agentsgym/GuessTheNumber-v0"

pytestmark = pytest.mark.usefixtures("torch_single_thread")


def play(server: Any, api: str) -> Any:
    agent = agentsgym.make_agent(
        "openai",
        base_url=server.base_url,
        model="tiny",
        api=api,
        max_tokens=4,
        max_retries=0,
        timeout=60,
    )
    env = agentsgym.make(GUESS, tokenizer=TINY, env_config={"max_steps_per_episode": 2})
    try:
        return env.run_trial([{"seed": 0}], agent, num_rollouts=2)
    finally:
        agent.close()


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_a_checkpoint_posted_to_the_server_moves_the_version_of_later_turns(
    api: str, tmp_path: Any
) -> None:
    policy = ModelPolicy("tiny", TINY, seed=0)
    changed = tmp_path / "changed"
    # a checkpoint with other weights: the served model, each weight moved a little
    with torch.no_grad():
        saved = {k: v.clone() for k, v in policy.model.state_dict().items()}
        for parameter in policy.model.parameters():
            parameter.add_(0.01)
        policy.model.save_pretrained(changed)
        policy.model.load_state_dict(saved)
    with OpenAICompatServer(policy, models=["tiny"]) as server:
        before = play(server, api)
        reply = httpx.post(f"{server.base_url}/update_weights", json={"checkpoint": str(changed)})
        assert reply.status_code == 200 and reply.json() == {"policy_version": 1}
        after = play(server, api)
    policy.close()
    assert {v for e in before.episodes for v in e.policy_versions} == {0}
    assert {v for e in after.episodes for v in e.policy_versions} == {1}
    embed = policy.model.get_input_embeddings().weight
    assert torch.allclose(embed, saved["model.embed_tokens.weight"] + 0.01, atol=1e-6)


def test_a_policy_without_weights_moves_its_version_only_and_refuses_a_checkpoint() -> None:
    with OpenAICompatServer(ScriptedPolicy(["[1]"]), models=["tiny"]) as server:
        moved = httpx.post(f"{server.base_url}/update_weights", json={"version": 7})
        assert moved.json() == {"policy_version": 7}
        refused = httpx.post(f"{server.base_url}/update_weights", json={"checkpoint": "/nowhere"})
        assert refused.status_code == 400 and "no weights to load" in refused.text
        batch = play(server, "chat")
    assert {v for e in batch.episodes for v in e.policy_versions} == {7}


def test_a_server_for_a_long_run_keeps_only_the_newest_request_bodies() -> None:
    with OpenAICompatServer(ScriptedPolicy(["[1]"]), models=["tiny"], keep_requests=2) as server:
        for word in ("first", "second", "third"):
            reply = httpx.post(
                f"{server.base_url}/chat/completions",
                json={"model": "tiny", "messages": [{"role": "user", "content": word}]},
            )
            assert reply.status_code == 200
        kept = [body["messages"][0]["content"] for body in server.requests]
    assert kept == ["second", "third"]
