"""The openai agent on vLLM's token-in generate API (``api="generate"``), against the
loopback server's emulation of vLLM's RL API (agentsgym_serve.vllm_rl)."""

from __future__ import annotations

import json
import threading
import urllib.request
from typing import Any

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("fastapi")
pytest.importorskip("torch")

import agentsgym
from agentsgym.errors import AgentError
from tiny_model_server import tiny_model_server

TINY = "agentsgym/tiny-chatml"
GUESS = "agentsgym/GuessTheNumber-v0"

pytestmark = pytest.mark.usefixtures("torch_single_thread")


@pytest.fixture(scope="module")
def engine() -> Any:
    with tiny_model_server() as server:
        yield server


def control(server: Any, path: str, body: Any = None) -> Any:
    """One call of vLLM's RL API (POST with a body or a query, GET without)."""
    root = server.base_url.removesuffix("/v1")
    data = None if body is None else json.dumps(body).encode()
    method = "GET" if path == "/weight_info" else "POST"
    request = urllib.request.Request(root + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"null")


def generate_agent(server: Any, **options: Any) -> Any:
    defaults = {"model": "tiny", "api": "generate", "max_tokens": 6, "max_retries": 0}
    return agentsgym.make_agent("openai", base_url=server.base_url, **{**defaults, **options})


def test_generate_is_token_in_with_sampled_ids_logprobs_and_versions(engine: Any) -> None:
    control(engine, "/update_weight_version", {"new_version": "5"})
    env = agentsgym.make(GUESS, tokenizer=TINY)
    task = env.get_train_dataset()[0]["task_data"]
    batch = env.run_trial([task], generate_agent(engine))
    [episode] = batch.episodes
    assert episode.ok, episode.error
    assert {s.token_source for s in episode.steps} == {"sampled"}
    assert episode.has_logprobs
    assert all(s.policy_versions == [5] * s.num_agent_tokens for s in episode.steps)
    sent = [r for r in engine.requests if "token_ids" in r]
    assert sent and all(r["sampling_params"]["logprobs"] == 0 for r in sent)
    assert all(r["sampling_params"]["max_tokens"] == 6 for r in sent)


def test_a_reply_frozen_across_a_weight_update_has_tokens_of_both_versions(engine: Any) -> None:
    """Paused with keep after 2 tokens, relabelled, resumed: the reply goes on (nothing
    replayed) and its first 2 tokens carry the old version, the rest the new one."""
    control(engine, "/update_weight_version", {"new_version": "1"})
    agent = generate_agent(engine, max_tokens=6)
    held = engine.engine.hold_after(2)
    replies: list[Any] = []
    thread = threading.Thread(
        target=lambda: replies.append(
            agentsgym.agents.call_agent(agent, [{"role": "user", "content": "hi"}], None, [1, 2, 3])
        )
    )
    requests_before = len(engine.requests)
    thread.start()
    try:
        assert held.wait(60)
        control(engine, "/pause?mode=keep")
        control(engine, "/update_weight_version", {"new_version": "2"})
        control(engine, "/resume")
    finally:
        engine.engine.release()
    thread.join(60)
    [(action, _)] = replies
    assert len(engine.requests) == requests_before + 1  # one request: not replayed
    assert action.policy_versions[:2] == [1, 1]
    assert set(action.policy_versions[2:]) == {2}
    assert action.policy_version == 1
    assert len(action.policy_versions) == len(action.token_ids) == len(action.logprobs)


def test_a_server_without_the_generate_api_is_named_with_what_to_do() -> None:
    with tiny_model_server(vllm=False) as server:
        agent = generate_agent(server)
        with pytest.raises(AgentError, match="--enable-scale-out"):
            agentsgym.agents.call_agent(agent, [{"role": "user", "content": "hi"}], None, [1, 2])
