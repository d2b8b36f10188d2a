"""The openai agent in chat mode with tools: it declares the episode's tools, records the
server's parsed ``tool_calls``, and sends calls (arguments as JSON text) and results back
the way OpenAI's API takes them."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web
from typing_extensions import Self

import agentsgym


class ToolCallingServer:
    """A chat server on loopback that calls ``multiply``, then ``add``, then answers, the
    way a vLLM server with a tool parser replies (no token ids)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        self._route(app)
        app.router.add_get("/v1/models", self._models)
        self.runner = web.AppRunner(app)
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.ready.set()
        self.loop.run_forever()

    def _route(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._chat)

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "m"}]})

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if len(results) < 2:
            name, arguments = (
                ("multiply", {"a": 3, "b": 4})
                if not results
                else ("add", {"a": int(results[0]), "b": 5})
            )
            call = {
                "id": f"c{len(results)}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            message["tool_calls"] = [call]
        else:
            message["content"] = f"\\boxed{{{results[-1]}}}"
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return web.json_response({"choices": [choice]})

    def __enter__(self) -> Self:
        self.thread.start()
        self.ready.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)


@pytest.fixture
def server() -> Iterator[ToolCallingServer]:
    with ToolCallingServer() as running:
        yield running


def test_the_openai_agent_declares_tools_and_plays_the_servers_calls(
    server: ToolCallingServer,
) -> None:
    env = agentsgym.make("tools/Calculator-v0", tokenizer=agentsgym.DEFAULT_TOKENIZER)
    agent = agentsgym.make_agent(
        "openai",
        base_url=f"http://127.0.0.1:{server.port}/v1",
        model="m",
        max_retries=0,
        api="chat",
    )
    try:
        batch = env.run_trial([{"a": 3, "b": 4, "c": 5}], agent, num_rollouts=1)
    finally:
        agent.close()
    episode = batch.episodes[0]
    assert episode.ok and episode.final_reward == 1.0, episode.error
    names = [s["function"]["name"] for s in server.requests[0]["tools"]]
    assert names == ["multiply", "add"] and all(
        r["tools"] == server.requests[0]["tools"] for r in server.requests
    )
    sent = server.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "tool"]
    assert sent[1]["tool_calls"][0]["function"] == {
        "name": "multiply",
        "arguments": '{"a": 3, "b": 4}',
    }
    assert [m["content"] for m in sent if m["role"] == "tool"] == ["12", "17"]
    # in the trajectory the calls are structured, with the server's ids, as templates render them
    recorded = episode.messages[1]["tool_calls"][0]
    assert recorded["id"] == "c0" and recorded["function"]["arguments"] == {"a": 3, "b": 4}
    assert [s.info.get("tool_calls") for s in episode.steps] == [1, 1, None]
    assert {s.info["token_source"] for s in episode.steps} == {"retokenized"}
    # the calls are retokenized as the template writes them: one segment, the full render
    assert len(episode.segments) == 1
    rendered = env.tokenizer.apply_chat_template(
        episode.messages, tools=server.requests[0]["tools"], tokenize=False
    )
    assert episode.full_token_ids == env.tokenizer(rendered, add_special_tokens=False)["input_ids"]
    assert "<tool_call>" in env.tokenizer.decode(episode.full_token_ids)


class RefusingServer(ToolCallingServer):
    """Refuses every completion with HTTP 500 and a many-line validation report, as
    llama.cpp's server answers a prompt given as token ids."""

    REPORT = "3 validation errors for CreateCompletionRequest\n" + "\n".join(
        f"prompt.{i}\n  Input should be a valid string [type=string_type, input_value={i}]"
        for i in range(40)
    )

    def _route(self, app: web.Application) -> None:
        app.router.add_post("/v1/completions", self._refuse)
        app.router.add_post("/v1/chat/completions", self._refuse)

    async def _refuse(self, request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": self.REPORT, "code": 500}}, status=500)


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_a_refusal_is_one_line_and_names_api_chat_for_token_prompts(api: str) -> None:
    from agentsgym.agents import call_agent
    from agentsgym.errors import AgentError

    with RefusingServer() as server:
        agent = agentsgym.make_agent(
            "openai",
            base_url=f"http://127.0.0.1:{server.port}/v1",
            model="m",
            api=api,
            max_retries=1,
            backoff=0.01,
        )
        with pytest.raises(AgentError) as info:
            call_agent(
                agent, [{"role": "user", "content": "hi"}], None, prompt_token_ids=[1, 2, 3]
            )
        agent.close()
    message = str(info.value)
    assert "\n" not in message and len(message) < 600, message
    assert "HTTP 500" in message and "3 validation errors for CreateCompletionRequest" in message
    assert ("use api=chat" in message) == (api == "completions")


def test_the_loopback_server_renders_the_tools_and_calls_as_the_stream_does() -> None:
    """Chat mode against the loopback server (vLLM-like, token ids): it renders the
    request's tools and the calls' JSON-text arguments as vLLM does, so the prompt ids it
    reports are the episode's stream: one segment, no mismatch."""
    pytest.importorskip("fastapi")
    from agentsgym_serve.model_server import OpenAICompatServer, ScriptedPolicy
    from agentsgym_tools.calculator import calculator_solver

    writer = calculator_solver(agentsgym.DEFAULT_TOKENIZER)  # calls as the template writes them

    def reply(messages: list[dict[str, Any]]) -> str:
        text, _ = writer.get_action(messages, None)
        return str(text)

    policy = ScriptedPolicy(reply, tokenizer=agentsgym.DEFAULT_TOKENIZER)
    env = agentsgym.make("tools/Calculator-v0", tokenizer=agentsgym.DEFAULT_TOKENIZER)
    with OpenAICompatServer(policy, models=["m"]) as server:
        agent = agentsgym.make_agent("openai", base_url=server.base_url, model="m", max_retries=0)
        try:
            batch = env.run_trial([{"seed": 1}, {"seed": 2}], agent, num_rollouts=1)
        finally:
            agent.close()
        assert all(r.get("tools") for r in server.requests)
    for episode in batch.episodes:
        assert episode.ok and episode.final_reward == 1.0, episode.error
        assert [s.info.get("tool_calls") for s in episode.steps] == [1, 1, None]
        assert {s.info["token_source"] for s in episode.steps} == {"server"}
        assert not any(s.info.get("server_prompt_mismatch") for s in episode.steps)
        assert len(episode.segments) == 1
