"""A served tool env runs its tool turns: the server drives the same EpisodeSession as
the local engine, so ``tools/Calculator-v0`` is won through ``agentsgym serve`` as it is
in process, whichever protocol the client speaks and however it sends its calls
(structured ``tool_calls``, or written in the reply text for the env to read)."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx
import pytest
from openenv.core import GenericEnvClient

import agentsgym
from agentsgym import AgentAction
from serve_helpers import fingerprint, served

pytestmark = pytest.mark.timeout(180)
CALCULATOR = "tools/Calculator-v0"
TINY = "agentsgym/tiny-chatml"
TASKS = [{"seed": seed} for seed in range(6)]
SOLVER = "tools/calculator-solver"  # the scripted tool agent the tools plugin registers


def solver(**options: Any) -> Any:
    return agentsgym.make_agent(SOLVER, **options)


def conversation(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in messages]


def test_the_solver_wins_through_a_remote_env_as_in_process() -> None:
    local = agentsgym.make(CALCULATOR).run_trial(TASKS, solver())
    assert local.final_rewards == [1.0] * len(TASKS)
    with served(CALCULATOR) as server:
        env = agentsgym.make(server.url)
        try:
            remote = env.run_trial(TASKS, solver())
        finally:
            env.close()
    assert remote.final_rewards == local.final_rewards
    for here, there in zip(local.episodes, remote.episodes, strict=True):
        assert there.ok and conversation(there.messages) == conversation(here.messages)
        assert [s.info for s in there.steps] == [s.info for s in here.steps]
        assert [s.reward for s in there.steps] == [s.reward for s in here.steps]
    assert remote.episodes[0].steps[0].info == {"tool_calls": 1}  # a tool turn, served


@pytest.mark.parametrize(
    "options",
    [{}, {"tokenizer": TINY}],
    ids=["structured tool_calls", "calls written in the message"],
)
def test_a_remote_env_records_the_in_process_episode_token_for_token(
    options: dict[str, Any],
) -> None:
    """The served env's tools render RemoteEnv's prompts (their schemas asked of the
    server), and its tool turns are recorded as in process: the reply as the toolbox
    read its calls, the tool messages with their ids and names, one segment."""
    local = agentsgym.make(CALCULATOR, tokenizer=TINY).run_trial(TASKS, solver(**options), 2)
    with served(CALCULATOR) as server:
        env = agentsgym.make(server.url, tokenizer=TINY)
        try:
            remote = env.run_trial(TASKS, solver(**options), 2)
        finally:
            env.close()
    assert not remote.failed and len(remote.episodes) == len(local.episodes) == 12
    assert fingerprint(remote) == fingerprint(local)  # every token, mask, reward and message
    episode = remote.episodes[0]
    assert len(episode.segments) == 1 and episode.num_agent_tokens > 100
    tool = next(m for m in episode.messages if m["role"] == "tool")
    assert tool["tool_call_id"] and tool["name"] in ("add", "multiply")


async def play_openenv(url: str, task: dict[str, Any], player: Any) -> dict[str, Any]:
    """One episode over OpenEnv's client: the solver's calls sent as it made them."""
    async with GenericEnvClient(base_url=url) as env:
        result = await env.reset(task_data=task)
        messages = list(result.observation["messages"])
        rewards = []
        while not result.done:
            action, _ = player.get_action(messages, None)
            if isinstance(action, str):
                action = AgentAction(text=action)
            sent: dict[str, Any] = {"message": action.text}
            if action.tool_calls:
                sent["tool_calls"] = action.tool_calls
            result = await env.step(sent)
            reply = {"role": "assistant", "content": action.text}
            messages += [reply, *result.observation["messages"]]
            rewards.append(result.reward)
        return {"messages": messages, "rewards": rewards}


@pytest.mark.parametrize(
    "options",
    [{}, {"tokenizer": TINY}],
    ids=["structured tool_calls", "calls written in the message"],
)
def test_openenv_clients_win_the_served_tool_env(options: dict[str, Any]) -> None:
    local = agentsgym.make(CALCULATOR).run_trial(TASKS, solver())
    player = solver(**options)
    with served(CALCULATOR) as server:

        async def all_episodes() -> list[dict[str, Any]]:
            return await asyncio.gather(*(play_openenv(server.url, t, player) for t in TASKS))

        played = asyncio.run(all_episodes())
    for here, there in zip(local.episodes, played, strict=True):
        assert there["rewards"] == [s.reward for s in here.steps] == [0.0, 0.0, 1.0]
        tools = [content for role, content in conversation(there["messages"]) if role == "tool"]
        expected = [m["content"] for m in here.messages if m["role"] == "tool"]
        assert tools == expected


def test_agentgym_clients_call_tools_in_the_action_text() -> None:
    writer = solver(tokenizer=TINY)
    with served(CALCULATOR) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        created = http.post("/create").json()
        question = created["observation"]
        assert "Use the tools" in question
        call = writer.write_calls([("multiply", {"a": 6, "b": 7})])
        step = http.post("/step", json={"id": created["id"], "action": call}).json()
        assert step == {
            "observation": "42",
            "reward": 0.0,
            "score": 0.0,
            "done": False,
            "truncated": False,  # beyond AgentGym's fields: AgentGymEnv reads it
            # the extras some of AgentGym's clients read (docs/serving.md)
            "state": "42",
            "task_description": question,
            "available_actions": [],
        }
        http.post("/close", json={"id": created["id"]})


def test_a_served_tool_turn_is_answered_over_agentsgym_v1_and_retried_safely() -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
    }
    with served(CALCULATOR) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        session = http.post("/agentsgym/v1/sessions", json={"task_data": {"seed": 1}}).json()
        url = f"/agentsgym/v1/sessions/{session['id']}/step"
        body = {"token": session["token"], "episode": 1, "step": 0, "action": ""}
        first = http.post(url, json={**body, "tool_calls": [call]})
        assert first.status_code == 200
        reply = first.json()
        assert reply["messages"] == [
            {"role": "tool", "tool_call_id": "c1", "name": "add", "content": "5"}
        ]
        assert reply["info"] == {"tool_calls": 1} and reply["reward"] == 0.0
        assert http.post(url, json={**body, "tool_calls": [call]}).content == first.content
        other = http.post(url, json=body)  # the same step with other calls: refused
        assert other.status_code == 409 and "different action" in other.json()["detail"]
        state = http.get(
            f"/agentsgym/v1/sessions/{session['id']}", params={"token": session["token"]}
        ).json()
        assert state["step"] == 1 and state["messages"][-2]["tool_calls"][0]["id"] == "c1"


def test_a_deeply_nested_websocket_message_is_invalid_json_and_the_session_lives(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="agentsgym_serve")
    with served(CALCULATOR) as server:

        async def exchange() -> list[dict[str, Any]]:
            from websockets.asyncio.client import connect

            replies = []
            async with connect(server.url.replace("http", "ws") + "/ws", max_size=None) as ws:
                for message in ("[" * 100_000, json.dumps({"type": "reset", "data": {}})):
                    await ws.send(message)
                    replies.append(json.loads(await ws.recv()))
            return replies

        replies = asyncio.run(exchange())
    assert replies[0]["type"] == "error" and replies[0]["data"]["code"] == "INVALID_JSON"
    assert "nested too deeply" in replies[0]["data"]["message"]
    assert replies[1]["type"] == "observation"  # the same session goes on
    events = [getattr(r, "fields", {}) for r in caplog.records]
    assert any(
        e.get("event") == "session_created" and e.get("protocol") == "openenv" for e in events
    )


def test_a_deeply_nested_http_body_is_answered_422() -> None:
    with served(CALCULATOR) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        reply = http.post("/step", content="[" * 100_000)
    assert reply.status_code == 422 and "nested too deeply" in reply.text
