"""`agentsgym serve` speaks OpenEnv's protocol (openenv-core 0.3.0): driven here by
openenv-core's own clients (``GenericEnvClient``, async and ``.sync()``), checked
against the same env played in process, and by openenv's message models."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

import agentsgym
from agentsgym_classical import BisectAgent
from serve_helpers import GUESS, served

openenv_core = pytest.importorskip("openenv.core")
from openenv.core import GenericEnvClient
from openenv.core.env_server.types import (
    EnvironmentMetadata,
    HealthResponse,
    HealthStatus,
    ResetResponse,
    SchemaResponse,
    StepResponse,
)

from agentsgym_serve.openenv_models import (
    AgentsgymAction,
    AgentsgymObservation,
    AgentsgymState,
)

pytestmark = pytest.mark.timeout(180)
TERMS = "serve_envs:TermsEnv"
CONFIG = {"max_steps_per_episode": 4}  # bisecting 1..100 takes up to 7: some truncate


def as_json(value: Any) -> Any:
    return json.loads(json.dumps(value))


async def play(url: str, task: dict[str, Any]) -> dict[str, Any]:
    """One episode through OpenEnv's async client, as the agent saw it."""
    agent = BisectAgent()
    async with GenericEnvClient(base_url=url) as env:
        result = await env.reset(task_data=task)
        AgentsgymObservation.model_validate(result.observation)  # openenv's own model
        messages = list(result.observation["messages"])
        steps = []
        while not result.done:
            reply, _ = agent.get_action(messages, None)
            result = await env.step(AgentsgymAction(message=reply))
            observation = result.observation
            messages += [{"role": "assistant", "content": reply}, *observation["messages"]]
            steps.append({**observation, "reward": result.reward, "done": result.done})
        state = await env.state()
    return {"messages": messages, "steps": steps, "state": state}


def test_openenv_clients_play_episodes_exactly_as_in_process() -> None:
    tasks = [{"seed": 2 * i} for i in range(24)]
    with served(TERMS, CONFIG, allow_class_paths=True) as server:

        async def all_episodes() -> list[dict[str, Any]]:
            return await asyncio.gather(*(play(server.url, t) for t in tasks))

        remote = asyncio.run(all_episodes())
        assert len(server.service.table) == 0  # every connection closed its session
    env = agentsgym.make(TERMS, env_config=CONFIG, allow_class_paths=True)
    local = env.run_trial(tasks, BisectAgent())
    truncated = 0
    for group, played in zip(local.groups, remote, strict=True):
        [episode] = group.episodes
        assert episode.ok
        assert played["messages"] == episode.messages  # system prompt, replies, prompts
        steps = played["steps"]
        # the protocol's reward is the step's whole reward, as the runner records it
        assert [s["reward"] for s in steps] == [s.reward for s in episode.steps]
        terms = [{**s["reward_terms"], **s["finish_terms"]} for s in steps]
        assert terms == [s.reward_terms for s in episode.steps]
        assert [s["info"] for s in steps] == as_json([s.info for s in episode.steps])
        assert steps[-1]["truncated"] == episode.truncated
        truncated += episode.truncated
        assert [s["step"] for s in steps] == list(range(1, len(steps) + 1))
        state = played["state"]
        assert (
            state["step_count"] == len(steps)
            and state["done"]
            and state["messages"] == (episode.messages)
        )
    assert 0 < truncated < len(tasks)  # both endings were played


def test_the_sync_client_and_the_message_and_reply_models() -> None:
    with served(GUESS) as server:
        client = GenericEnvClient(base_url=server.url).sync()
        with client:
            first = client.reset(data_idx=3)
            assert first.reward == 0.0 and first.done is False
            text = first.observation["text"]
            assert text.startswith("I am thinking of an integer")
            again = client.reset(seed=3)  # seed n picks row n % 200: the same task
            assert again.observation["text"] == text
            assert again.observation["episode"] == 2
            result = client.step({"message": "[50]"})
            assert result.observation["info"]["guess"] == 50
            state = AgentsgymState.model_validate(client.state())
            assert state.step_count == 1 and state.episode == 2
        with httpx.Client(base_url=server.url) as http:
            # openenv's own model, which forbids fields it does not know
            health = HealthResponse.model_validate(http.get("/health").json())
            assert health.status == HealthStatus.HEALTHY
            schema = SchemaResponse.model_validate(http.get("/schema").json())
            assert schema.action == AgentsgymAction.model_json_schema()
            assert schema.observation == AgentsgymObservation.model_json_schema()
            meta = EnvironmentMetadata.model_validate(http.get("/metadata").json())
            assert meta.name == GUESS
            assert AgentsgymState.model_validate(http.get("/state").json()).step_count == 0
            # the stateless HTTP calls: a fresh episode each, closed afterwards
            reset = ResetResponse.model_validate(http.post("/reset", json={"data_idx": 3}).json())
            assert reset.observation["text"] == text
            body = {"action": {"message": "[50]"}, "data_idx": 3}
            step = StepResponse.model_validate(http.post("/step", json=body).json())
            assert step.observation["info"]["guess"] == 50 and step.reward == 0.0
            assert http.get("/agentsgym/v1/health").json()["sessions"] == 0


@pytest.mark.parametrize("compression", [False, True])
def test_a_clients_offer_of_compression_is_taken_only_when_the_server_allows_it(
    compression: bool,
) -> None:
    from websockets.asyncio.client import connect

    from agentsgym_serve import BackgroundServer, create_app

    app = create_app(GUESS)
    with BackgroundServer(app, ws_compression=compression) as server:

        async def reset() -> tuple[str | None, dict[str, Any]]:
            # websockets' client offers permessage-deflate, as openenv-core's does
            async with connect(server.url.replace("http", "ws") + "/ws") as ws:
                await ws.send(json.dumps({"type": "reset", "data": {"data_idx": 3}}))
                reply = json.loads(await ws.recv())
                return ws.response.headers.get("Sec-WebSocket-Extensions"), reply

        accepted, reply = asyncio.run(reset())
    assert (accepted or "").startswith("permessage-deflate") is compression
    assert reply["type"] == "observation" and reply["data"]["observation"]["episode"] == 1


def test_bad_messages_get_errors_that_say_what_to_do() -> None:
    with served(GUESS) as server:

        async def exchange() -> list[dict[str, Any]]:
            from websockets.asyncio.client import connect

            replies = []
            async with connect(server.url.replace("http", "ws") + "/ws") as ws:
                for message in (
                    "{not json",
                    json.dumps({"type": "jump"}),
                    json.dumps({"type": "reset", "data": {"data_idx": 10**6}}),
                    json.dumps({"type": "reset", "data": {"data_idx": "3"}}),
                    json.dumps({"type": "reset", "data": {"data_idx": 0}}),
                    json.dumps({"type": "step", "data": {"text": "[50]"}}),
                    json.dumps({"type": "step", "data": {"message": "[50]"}}),
                ):
                    await ws.send(message)
                    replies.append(json.loads(await ws.recv()))
            return replies

        replies = asyncio.run(exchange())
    codes = [r["data"]["code"] if r["type"] == "error" else r["type"] for r in replies]
    assert codes == [
        "INVALID_JSON",
        "UNKNOWN_TYPE",
        "EXECUTION_ERROR",
        "VALIDATION_ERROR",
        "observation",
        "VALIDATION_ERROR",
        "observation",
    ]
    messages = [r["data"].get("message", "") for r in replies]
    assert "reset, step, state, close and mcp" in messages[1]
    assert "past the end" in messages[2]
    assert "seed, episode_id, task_data and data_idx" in messages[3]  # a known key, mistyped
    assert '{"message": str' in messages[5]


def test_many_sessions_at_once_a_cap_and_idle_expiry() -> None:
    # The cap on a server whose sessions cannot expire meanwhile, however slow the
    # machine; idle expiry on one with a short idle timeout.
    with served(GUESS, max_sessions=40, idle_timeout=3600) as server:

        async def crowd() -> None:
            clients = [GenericEnvClient(base_url=server.url) for _ in range(40)]
            await asyncio.gather(*(c.connect() for c in clients))
            results = await asyncio.gather(*(c.reset(data_idx=i) for i, c in enumerate(clients)))
            assert all(not r.done for r in results)
            extra = GenericEnvClient(base_url=server.url)
            with pytest.raises(RuntimeError, match="CAPACITY_REACHED") as full:
                await extra.reset()
            assert "--max-sessions" in str(full.value)
            await extra.close()
            await asyncio.gather(*(c.close() for c in clients))

        asyncio.run(crowd())
        deadline = asyncio.run(_wait_empty(server))
        assert deadline

    with served(GUESS, max_sessions=40, idle_timeout=0.5) as server:

        async def idle() -> str:
            async with GenericEnvClient(base_url=server.url) as env:
                await env.reset(data_idx=0)
                assert await _wait_empty(server)  # reaped while the client sat idle
                with pytest.raises(Exception) as closed:
                    await env.step({"message": "[50]"})
                    await env.step({"message": "[50]"})
                return str(closed.value)

        text = asyncio.run(idle())
    assert "idle" in text


async def _wait_empty(server: Any, timeout: float = 60.0) -> bool:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while len(server.service.table) and loop.time() < end:
        await asyncio.sleep(0.05)
    return len(server.service.table) == 0
