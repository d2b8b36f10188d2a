"""A served tool env's tools belong to each session's own episode: the tools a session
lists (OpenEnv's MCP, agentsgym/v1's ``POST /tools``) are those of its task, and a call
runs with its own episode's context (session, task, state), never another session's,
however many sessions play at once, and whether or not they play the same task."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

pytest.importorskip("openenv.core")

from serve_helpers import served

pytestmark = pytest.mark.timeout(180)
WHO = "serve_envs:WhoEnv"
CALL_WHOAMI = {"type": "call_tool", "tool_name": "whoami", "arguments": {}}


async def ws_exchange(url: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from websockets.asyncio.client import connect

    replies = []
    async with connect(url.replace("http", "ws", 1) + "/ws") as ws:
        for message in messages:
            await ws.send(json.dumps(message))
            replies.append(json.loads(await ws.recv())["data"])
    return replies


def play_at_once(url: str, resets: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """One /ws session per reset's data, all at once: reset, list the tools, call whoami."""

    async def one(data: dict[str, Any]) -> list[dict[str, Any]]:
        steps = [
            {"type": "step", "data": {"type": "list_tools"}},
            {"type": "step", "data": CALL_WHOAMI},
        ]
        return await ws_exchange(url, [{"type": "reset", "data": data}, *steps])

    async def all_sessions() -> list[list[dict[str, Any]]]:
        return list(await asyncio.gather(*(one(data) for data in resets)))

    return asyncio.run(all_sessions())


def listed(reply: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in reply["observation"]["tools"]]


def test_sessions_of_different_tasks_list_and_call_their_own_tools() -> None:
    tasks = [{"secret": "a", "tools": ["whoami"]}, {"secret": "b"}]
    resets = [{"task_data": task, "episode_id": f"ep-{task['secret']}"} for task in tasks]
    with served(WHO, allow_class_paths=True) as server:
        first, second = play_at_once(server.url, resets)
        asked = [
            httpx.post(f"{server.url}/agentsgym/v1/tools", json={"task_data": t}, timeout=30)
            for t in tasks
        ]
    assert listed(first[1]) == ["whoami"] and listed(second[1]) == ["whoami", "peek"]
    assert first[2]["observation"]["result"]["data"] == "ep-a|a|a"
    assert second[2]["observation"]["result"]["data"] == "ep-b|b|b"
    names = [[s["function"]["name"] for s in reply.json()["tools"]] for reply in asked]
    assert names == [["whoami"], ["whoami", "peek"]]


def test_sessions_of_one_dataset_row_call_tools_with_their_own_episode() -> None:
    """Both sessions start the same row of the served split (one task object on the
    server) at once: each call names its own episode."""
    resets = [{"data_idx": 0, "episode_id": name} for name in ("ep-1", "ep-2")]
    with served(WHO, allow_class_paths=True) as server:
        played = play_at_once(server.url, resets)
    answers = [replies[2]["observation"]["result"]["data"] for replies in played]
    assert answers == ["ep-1|shared|shared", "ep-2|shared|shared"]
