"""The OpenAI-compatible agent against the loopback test server."""

from __future__ import annotations

import logging
import socket
import threading
from typing import Any

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
torch = pytest.importorskip("torch")

import agentsgym
from agentsgym.agents import call_agent
from agentsgym.agents.openai_agent import OpenAIAgent
from agentsgym.errors import AgentError
from agentsgym_serve.model_server import OpenAICompatServer, ScriptedPolicy
from tiny_model_server import tiny_model_server

TINY = "agentsgym/tiny-chatml"
GUESS = "agentsgym/GuessTheNumber-v0"
MODEL = "tiny"


# Two torch threads contending with the runner's threads on 2 cores run 10-30x slower.
pytestmark = pytest.mark.usefixtures("torch_single_thread")


@pytest.fixture(scope="module")
def vllm_like() -> Any:
    """A server that answers like vLLM, with the tiny random model."""
    with tiny_model_server((MODEL, "other-model")) as server:
        yield server


def agent_for(server: Any, **options: Any) -> OpenAIAgent:
    defaults: dict[str, Any] = {"model": MODEL, "max_tokens": 6, "max_retries": 0, "timeout": 30}
    return agentsgym.make_agent("openai", base_url=server.base_url, **{**defaults, **options})


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_server_token_ids_and_logprobs_go_into_the_trajectory(vllm_like: Any) -> None:
    """Every reply's ids and logprobs are an agent span of exactly one segment.

    Some samples of the random tiny model (bytes that re-tokenize differently when the
    server renders the conversation) make the server's prompt ids differ from the
    stream, which starts a new segment: such an episode is two rows of its group. Which
    samples come depends on the order in which the rollouts reach the server's seeded
    generator, which a loaded machine changes; so every row's segment is checked once
    (issue 28: reading ``segments[0]`` of each row met a reply twice, a StopIteration).
    """
    agent = agent_for(vllm_like, timeout=300)
    replies: list[tuple[list[int], list[float]]] = []

    def recording(messages: Any, state: Any) -> Any:
        action, state = call_agent(agent, messages, state)
        replies.append((action.token_ids, action.logprobs))
        return action, state

    env = agentsgym.make(GUESS, tokenizer=TINY, env_config={"max_steps_per_episode": 2})
    start = len(vllm_like.requests)
    batch = env.run_trial([{"seed": 0}], agentsgym.FunctionAgent(recording), num_rollouts=2)
    agent.close()
    assert not batch.failed
    sent = vllm_like.requests[start:]
    assert sent and all(r["return_token_ids"] is True and r["logprobs"] is True for r in sent)
    for episode, index in batch.groups[0].rows:
        assert episode.has_logprobs
        assert all(s.info["token_source"] == "server" for s in episode.steps)
        segment = episode.segments[index]
        mask = segment.agent_mask
        starts = [i for i in range(1, len(mask)) if mask[i] and not mask[i - 1]]
        for begin in starts:
            end = begin
            while end < len(mask) and mask[end]:
                end += 1
            # the server's ids token for token; logprobs kept as float32
            ids = segment.token_ids[begin:end].tolist()
            matches = [r for r in replies if r[0] == ids]
            assert matches, f"an agent span that no reply sampled: {ids}"
            assert segment.logprobs[begin:end].tolist() == pytest.approx(matches[0][1], rel=1e-6)
            replies.remove(matches[0])
    assert not replies


def test_a_reply_the_server_renders_differently_starts_a_segment_trained_once() -> None:
    """The case the test above meets by chance, played on purpose: a reply whose text
    re-tokenizes differently makes the server's next prompt differ from the stream."""
    with tiny_model_server((MODEL,)) as server:
        agent = agent_for(server, timeout=300)
        env = agentsgym.make(GUESS, tokenizer=TINY, env_config={"max_steps_per_episode": 2})
        # seed 0, one rollout after the other: the second samples such a reply
        batch = env.run_trial([{"seed": 0}], agent, num_rollouts=2, max_concurrency=1)
        agent.close()
    assert not batch.failed
    rows = batch.groups[0].rows
    episodes = {id(e): e for e, _ in rows}
    assert len(rows) == 3 and len(episodes) == 2  # one episode split in two segments
    generated = sum(int(e.segments[i].agent_mask.sum()) for e, i in rows)
    assert generated == sum(s.num_agent_tokens for e in episodes.values() for s in e.steps)


def test_completions_api_sends_the_episode_token_ids_as_the_prompt(vllm_like: Any) -> None:
    agent = agent_for(vllm_like, api="completions")
    assert agent.wants_prompt_token_ids
    env = agentsgym.make(GUESS, tokenizer=TINY, env_config={"max_steps_per_episode": 2})
    start = len(vllm_like.requests)
    batch = env.run_trial([{"seed": 3}], agent, num_rollouts=1)
    agent.close()
    assert not batch.failed
    episode = batch.episodes[0]
    segment = episode.segments[0]
    prompts = [r["prompt"] for r in vllm_like.requests[start:]]
    assert len(prompts) == episode.num_turns
    positions = [
        i
        for i in range(len(segment.agent_mask))
        if segment.agent_mask[i] and not segment.agent_mask[i - 1]
    ]
    for prompt, position in zip(prompts, positions):
        assert (
            prompt == segment.token_ids[:position].tolist()
        )  # token-in: exactly the episode's ids
    assert all(s.info["token_source"] == "sampled" for s in episode.steps)


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_a_reply_cut_at_max_tokens_is_flagged_truncated(vllm_like: Any, api: str) -> None:
    agent = agent_for(vllm_like, api=api, max_tokens=2)
    env = agentsgym.make(GUESS, tokenizer=TINY, env_config={"max_steps_per_episode": 2})
    batch = env.run_trial([{"seed": 1}], agent, num_rollouts=2)
    agent.close()
    steps = [s for e in batch.episodes for s in e.steps]
    assert steps and not batch.failed
    for step in steps:  # the untrained model rarely stops within 2 tokens
        assert step.reply_truncated == (step.info["finish_reason"] == "length")
    assert any(s.reply_truncated for s in steps)


def test_a_server_without_token_ids_gives_text_and_the_trajectory_says_so(caplog: Any) -> None:
    with OpenAICompatServer(
        ScriptedPolicy(["My guess is [50]."]), models=["gpt"], vllm=False
    ) as server:
        agent = agent_for(server, model="gpt")
        env = agentsgym.make(GUESS, tokenizer=TINY, env_config={"max_steps_per_episode": 2})
        with caplog.at_level(logging.WARNING, logger="agentsgym.agents.openai_agent"):
            batch = env.run_trial(
                [{"seed": 0}, {"seed": 1}], agent, num_rollouts=1, max_concurrency=1
            )
        agent.close()
        requests = server.requests
    assert not batch.failed
    for episode in batch.episodes:
        assert not episode.has_logprobs
        assert all(s.info["token_source"] == "retokenized" for s in episode.steps)
        record = episode.to_record()
        assert record["step_infos"][0]["token_source"] == "retokenized"
    # asked once with the vLLM fields, refused, then plain requests only
    assert "return_token_ids" in requests[0]
    assert all("return_token_ids" not in r and "logprobs" not in r for r in requests[1:])
    assert sum("token-id fields" in r.getMessage() for r in caplog.records) == 1


def test_requests_in_flight_when_a_strict_server_refuses_token_fields_all_succeed() -> None:
    """An OpenAI-strict server refuses vLLM's token-id fields with HTTP 400: every
    request that carried them goes again without them, also those already in flight
    when the first refusal came back (issue 28: 5 of 6 parallel episodes failed)."""
    import asyncio

    hi = [{"role": "user", "content": "hi"}]
    with OpenAICompatServer(ScriptedPolicy(["[7]"]), models=["gpt"], vllm=False) as server:
        agent = OpenAIAgent(base_url=server.base_url, model="gpt", max_retries=0)

        async def six_at_once() -> list[Any]:
            # gather starts all six before any answer is read: all six carry the fields
            return await asyncio.gather(*(agent.aget_action_reply(hi) for _ in range(6)))

        replies = asyncio.run(six_at_once())
        agent.close()
        requests = server.requests
    assert [r.text for r in replies] == ["[7]"] * 6
    with_fields = [r for r in requests if "return_token_ids" in r]
    assert len(with_fields) == 6 and len(requests) == 12
    assert agent.request_token_ids is False


def test_six_parallel_episodes_against_a_strict_server_all_succeed() -> None:
    with OpenAICompatServer(ScriptedPolicy(["[20]", "[50]"]), models=["gpt"], vllm=False) as s:
        agent = OpenAIAgent(base_url=s.base_url, model="gpt", max_retries=0)
        env = agentsgym.make(GUESS, tokenizer=TINY, env_config={"max_steps_per_episode": 2})
        batch = env.run_trial([{"seed": 0}], agent, num_rollouts=6, max_concurrency=6)
        agent.close()
    assert not batch.failed and len(batch.episodes) == 6
    assert all(s.info["token_source"] == "retokenized" for e in batch.episodes for s in e.steps)


def test_transient_errors_are_retried_with_backoff(vllm_like: Any) -> None:
    agent = agent_for(vllm_like, max_retries=3, backoff=0.01)
    for status in (503, 429):
        start = len(vllm_like.requests)
        vllm_like.fail_next(2, status=status)
        action, _ = call_agent(agent, [{"role": "user", "content": "hi"}], None)
        assert action.token_ids and len(vllm_like.requests) - start == 3
    vllm_like.fail_next(5, status=502)
    with pytest.raises(AgentError, match="HTTP 502.*4 attempts"):
        call_agent(agent, [{"role": "user", "content": "hi"}], None)
    vllm_like.fail_next(0)
    agent.close()


def test_an_unreachable_server_is_a_clear_error() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    agent = OpenAIAgent(base_url=url, model="m", max_retries=1, backoff=0.01)
    with pytest.raises(AgentError) as info:
        call_agent(agent, [{"role": "user", "content": "hi"}], None)
    message = str(info.value)
    assert "cannot reach" in message and url in message and "2 attempts" in message
    assert "vllm serve" in message
    agent.close()


def test_a_bad_model_name_lists_the_served_models(vllm_like: Any) -> None:
    agent = agent_for(vllm_like, model="Qwen/Qwen2.5-0.5B")
    with pytest.raises(AgentError, match="'Qwen/Qwen2.5-0.5B' is not served") as info:
        call_agent(agent, [{"role": "user", "content": "hi"}], None)
    assert "'tiny'" in str(info.value) and "'other-model'" in str(info.value)
    with pytest.raises(AgentError, match="serves 'tiny', 'other-model'; choose one"):
        call_agent(agent_for(vllm_like, model=None), [{"role": "user", "content": "hi"}], None)
    agent.close()


def test_the_only_served_model_is_used_when_none_is_named() -> None:
    with OpenAICompatServer(ScriptedPolicy(["[1]"]), models=["solo"]) as server:
        agent = OpenAIAgent(base_url=server.base_url)
        action, _ = call_agent(agent, [{"role": "user", "content": "hi"}], None)
        assert action.text == "[1]" and agent.model == "solo"
        assert agent.check() == ["solo"]
        agent.close()


def test_timeouts_and_api_keys(monkeypatch: Any) -> None:
    with OpenAICompatServer(
        ScriptedPolicy(["ok"]), models=["m"], api_key="sekret", delay=1.5
    ) as server:
        slow = OpenAIAgent(
            base_url=server.base_url, model="m", api_key="sekret", timeout=0.2, max_retries=0
        )
        with pytest.raises(AgentError, match="did not answer within 0.2s"):
            call_agent(slow, [{"role": "user", "content": "hi"}], None)
        slow.close()
        server.delay = 0.0
        wrong = OpenAIAgent(base_url=server.base_url, model="m", api_key="nope", max_retries=0)
        with pytest.raises(AgentError, match="rejected the API key"):
            call_agent(wrong, [{"role": "user", "content": "hi"}], None)
        wrong.close()
        monkeypatch.setenv("OPENAI_API_KEY", "sekret")
        from_env = OpenAIAgent(base_url=server.base_url, model="m")
        assert call_agent(from_env, [{"role": "user", "content": "hi"}], None)[0].text == "ok"
        from_env.close()
        monkeypatch.delenv("OPENAI_API_KEY")
        in_url = OpenAIAgent(base_url=server.base_url.replace("://", "://sekret@"), model="m")
        assert in_url.base_url == server.base_url
        assert call_agent(in_url, [{"role": "user", "content": "hi"}], None)[0].text == "ok"
        in_url.close()


@pytest.mark.parametrize("limit", [2, 6])
def test_max_concurrency_bounds_the_requests_in_flight(limit: int) -> None:
    with OpenAICompatServer(ScriptedPolicy(["ok"]), models=["m"], delay=0.5) as server:
        agent = OpenAIAgent(base_url=server.base_url, model="m", max_concurrency=limit)
        threads = [
            threading.Thread(
                target=call_agent, args=(agent, [{"role": "user", "content": "hi"}], None)
            )
            for _ in range(6)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        agent.close()
        assert len(server.requests) == 6
        assert server.max_in_flight <= limit
        if limit == 6:  # the bound, not the server, is what held it to 2 above
            assert server.max_in_flight > 2


def test_a_plain_text_caller_gets_a_reply_without_token_ids(vllm_like: Any) -> None:
    """What an env's game master does: get_action(messages, state), no tokenizer."""
    agent = agentsgym.make_agent("openai", base_url=vllm_like.base_url, model=MODEL, max_tokens=4)
    messages = [{"role": "user", "content": "Is it a cat?"}]
    action, state = call_agent(agent, messages, {"k": 1})
    agent.close()
    assert state == {"k": 1}
    assert vllm_like.requests[-1]["messages"] == messages  # a chat request, no token prompt
    tokenizer = agentsgym.load_tokenizer(TINY)
    assert action.text == tokenizer.decode(action.token_ids, skip_special_tokens=True)


def test_a_pooled_connection_the_server_closed_is_not_a_failure() -> None:
    """uvicorn (vLLM's server) closes idle keep-alive connections; a request that meets
    one on its pooled connection goes again on a fresh one, even with max_retries=0."""
    import asyncio
    import json as jsonlib

    from agentsgym.agents.openai_http import JSONClient

    async def scenario() -> list[dict[str, Any]]:
        async def read_request(reader: asyncio.StreamReader) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
            await reader.readexactly(length)

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            # Answer the first request of a connection as keep-alive; hang up on the
            # second without an answer, as a server does that closes an idle connection
            # just as the client reuses it.
            await read_request(reader)
            body = jsonlib.dumps({"ok": True}).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Connection: keep-alive\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            await writer.drain()
            try:
                await read_request(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = JSONClient(f"http://127.0.0.1:{port}/v1", "EMPTY", 10.0, 1)
        try:
            first = await client.request("POST", "/completions", {"n": 1})
            second = await client.request("POST", "/completions", {"n": 2})
        finally:
            await client.close()
            server.close()
        return [first, second]

    assert asyncio.run(scenario()) == [{"ok": True}, {"ok": True}]


UNCLOSED_SCRIPT = """
import asyncio, gc
from agentsgym.agents import acall_agent, call_agent
from agentsgym.agents.openai_agent import OpenAIAgent
from agentsgym_serve.model_server import OpenAICompatServer, ScriptedPolicy

hi = [{"role": "user", "content": "hi"}]
with OpenAICompatServer(ScriptedPolicy(["ok"]), models=["m"]) as server:
    dropped = OpenAIAgent(base_url=server.base_url, model="m")
    assert call_agent(dropped, hi, None)[0].text == "ok"
    del dropped
    gc.collect()
    owned = OpenAIAgent(base_url=server.base_url, model="m")
    assert asyncio.run(acall_agent(owned, hi, None))[0].text == "ok"
    kept = OpenAIAgent(base_url=server.base_url, model="m")
    assert call_agent(kept, hi, None)[0].text == "ok"
    print("played")
"""


def test_an_agent_never_closed_leaves_no_http_session_open() -> None:
    """Dropped without close(), used in asyncio.run, or alive at exit: the agent's
    aiohttp sessions are closed (aiohttp reported them unclosed at exit)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", UNCLOSED_SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and "played" in done.stdout, done.stderr
    assert "Unclosed" not in done.stderr and "ResourceWarning" not in done.stderr, done.stderr
