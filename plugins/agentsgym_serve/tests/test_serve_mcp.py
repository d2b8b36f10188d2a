"""`agentsgym serve` serves OpenEnv's MCP endpoints for a tool env (issue 27, point 13):
openenv-core's own ``MCPToolClient`` (the client of OpenEnv's EchoEnv) lists and calls
the served env's tools, over ``/ws`` steps and in its HTTP production mode; ``POST
/mcp`` and the ``mcp`` WebSocket message speak JSON-RPC as openenv-core's server does;
and ``openenv validate --url`` passes. A tool call is a tool turn of the session's
episode."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import httpx
import pytest

pytest.importorskip("openenv.core")
from openenv.core.mcp_client import MCPToolClient

from agentsgym_serve.openenv_models import AgentsgymAction
from serve_helpers import GUESS, served

pytestmark = pytest.mark.timeout(180)
CALCULATOR = "tools/Calculator-v0"
TASK = {"a": 12, "b": 34, "c": 5}  # 12 * 34 + 5 = 413


def rpc(method: str, params: dict[str, Any] | None = None, id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params or {}, "id": id}


async def ws_exchange(url: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from websockets.asyncio.client import connect

    replies = []
    async with connect(url.replace("http", "ws", 1) + "/ws") as ws:
        for message in messages:
            await ws.send(json.dumps(message))
            replies.append(json.loads(await ws.recv()))
    return replies


def test_openenvs_mcp_tool_client_plays_the_served_tool_env() -> None:
    with served(CALCULATOR) as server:

        async def play() -> dict[str, Any]:
            async with MCPToolClient(base_url=server.url) as env:
                await env.reset(task_data=TASK)
                tools = await env.list_tools()
                product = await env.call_tool("multiply", a=12, b=34)
                total = await env.call_tool("add", a=int(product), b=5)
                errors = []
                for name, arguments in (("divide", {"a": 1}), ("add", {"a": 1})):
                    with pytest.raises(RuntimeError) as raised:
                        await env.call_tool(name, **arguments)
                    errors.append(str(raised.value))
                answer = await env.step(AgentsgymAction(message=f"\\boxed{{{total}}}"))
                with pytest.raises(RuntimeError) as late:
                    await env.call_tool("add", a=1, b=2)
                return {
                    "tools": tools,
                    "results": (product, total),
                    "errors": errors,
                    "answer": answer,
                    "late": str(late.value),
                }

        played = asyncio.run(play())
        assert len(server.service.table) == 0  # the connection's session closed with it
    assert [t.name for t in played["tools"]] == ["multiply", "add"]
    assert played["tools"][0].input_schema["required"] == ["a", "b"]
    assert played["results"] == ("408", "413")
    unknown, failed = played["errors"]
    assert "Tool not found: divide" in unknown and "tool_not_found" in unknown
    assert "Error:" in failed and "execution_error" in failed  # the tool's own answer
    assert played["answer"].reward == 1.0 and played["answer"].done
    assert "is over" in played["late"] and "reset" in played["late"]


def test_a_tool_call_is_a_tool_turn_of_the_sessions_episode() -> None:
    call = {"type": "call_tool", "tool_name": "multiply", "arguments": {"a": 12, "b": 34}}
    with served(CALCULATOR) as server:
        replies = asyncio.run(
            ws_exchange(
                server.url,
                [
                    {"type": "step", "data": {"type": "list_tools"}},  # before any reset
                    {"type": "reset", "data": {"task_data": {**TASK, "tools": ["multiply"]}}},
                    {"type": "step", "data": {"type": "list_tools"}},
                    {"type": "step", "data": call},
                    {"type": "state"},
                ],
            )
        )
    early, _, listed, called, state = (r["data"] for r in replies)
    # listing started the session's first episode (the split's next task): its tools
    assert [t["name"] for t in early["observation"]["tools"]] == ["multiply", "add"]
    # the episode's tools are its task's (this task narrows them to one)
    assert [t["name"] for t in listed["observation"]["tools"]] == ["multiply"]
    assert (listed["reward"], listed["done"]) == (None, False)  # a listing is no turn
    observation = called["observation"]
    assert observation["tool_name"] == "multiply" and observation["error"] is None
    assert observation["result"]["data"] == "408" and not observation["result"]["is_error"]
    assert observation["info"] == {"tool_calls": 1} and observation["step"] == 1
    assert called["reward"] == 0.0 and called["done"] is False
    assert observation["messages"][0]["role"] == "tool"
    assert state["step_count"] == 1
    assistant, answer = state["messages"][-2:]
    assert assistant["tool_calls"][0]["function"]["name"] == "multiply"
    assert answer == observation["messages"][0]


def test_the_http_production_mode_of_the_mcp_tool_client() -> None:
    with served(CALCULATOR) as server:

        async def play() -> tuple[list[str], Any]:
            env = MCPToolClient(base_url=server.url)
            env.use_production_mode = True  # JSON-RPC at POST /mcp, a session of its own
            async with env:
                tools = [t.name for t in await env.list_tools()]
                return tools, await env.call_tool("multiply", a=6, b=7)

        tools, product = asyncio.run(play())
        assert len(server.service.table) == 0  # closed by openenv/session/close
    assert tools == ["multiply", "add"] and product == "42"


def test_post_mcp_speaks_json_rpc_as_openenv_core_does() -> None:
    with served(CALCULATOR, max_sessions=1) as server, httpx.Client(base_url=server.url) as http:

        def post(body: Any) -> dict[str, Any]:
            reply = http.post("/mcp", json=body)
            assert reply.status_code == 200  # errors too, as openenv-core answers them
            return reply.json()  # type: ignore[no-any-return]

        assert http.post("/mcp", content=b"{nope").json()["error"]["code"] == -32700
        assert post({})["error"]["code"] == -32600 and post({})["jsonrpc"] == "2.0"
        assert post(rpc("resources/list"))["error"]["code"] == -32601
        assert post(rpc("tools/call", {"arguments": {}}))["error"]["code"] == -32602
        unknown = post(rpc("tools/list", {"session_id": "123-abc"}))["error"]
        assert unknown["code"] == -32602 and "Unknown session_id" in unknown["message"]
        # without a session: a fresh episode, picked as a reset's data picks it
        fresh = post(rpc("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}, "seed": 4}))
        assert fresh["id"] == 1 and fresh["result"]["data"] == "5"
        assert len(server.service.table) == 0
        # a session: create, play, close; past --max-sessions, openenv's capacity error
        key = post(rpc("openenv/session/create"))["result"]["session_id"]
        full = post(rpc("openenv/session/create"))["error"]
        assert full["code"] == -32000 and full["data"]["max_sessions"] == 1
        listed = post(rpc("tools/list", {"session_id": key}))["result"]["tools"]
        assert [t["name"] for t in listed] == ["multiply", "add"]
        assert listed[0]["inputSchema"]["properties"]["a"]["type"] == "integer"
        call = {"name": "multiply", "arguments": {"a": 3}, "session_id": key}  # no b
        failed = post(rpc("tools/call", call, id=7))
        assert failed["id"] == 7 and failed["error"]["code"] == -32603
        assert failed["error"]["message"].startswith("Error:")
        assert failed["error"]["data"]["result"]["is_error"] is True
        forged = key.split("-")[0] + "-" + "0" * 32  # the id without its token
        assert (
            "Unknown session_id"
            in post(rpc("tools/list", {"session_id": forged}))["error"]["message"]
        )
        closed = post(rpc("openenv/session/close", {"session_id": key}))["result"]
        assert closed == {"session_id": key, "closed": True} and len(server.service.table) == 0
    with served(GUESS) as plain, httpx.Client(base_url=plain.url) as http:
        refused = http.post("/mcp", json=rpc("tools/list")).json()["error"]
        assert refused["code"] == -32603 and "does not support MCP" in refused["message"]


def test_the_mcp_websocket_message_uses_the_connections_session() -> None:
    with served(CALCULATOR) as server:
        replies = asyncio.run(
            ws_exchange(
                server.url,
                [
                    {"type": "reset", "data": {"task_data": TASK}},
                    {"type": "mcp", "data": rpc("openenv/session/create")},
                    {"type": "mcp", "data": rpc("tools/list", id=2)},
                    {
                        "type": "mcp",
                        "data": rpc(
                            "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}, id=3
                        ),
                    },
                    {"type": "mcp", "data": {"method": "tools/list"}},
                    {"type": "state"},
                ],
            )
        )
        key = replies[1]["data"]["result"]["session_id"]
        own = asyncio.run(
            ws_exchange(
                server.url,
                [
                    {"type": "mcp", "data": rpc("openenv/session/create")},
                    {"type": "mcp", "data": rpc("openenv/session/close", {"session_id": key})},
                ],
            )
        )
    assert all(r["type"] == "mcp" for r in replies[1:5])
    assert [t["name"] for t in replies[2]["data"]["result"]["tools"]] == ["multiply", "add"]
    assert replies[3]["data"] == {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {
            "content": [{"type": "text", "text": "3"}],
            "structured_content": None,
            "meta": None,
            "data": "3",
            "is_error": False,
        },
    }
    assert replies[4]["data"]["error"]["code"] == -32600  # not JSON-RPC 2.0
    assert replies[5]["data"]["step_count"] == 1  # the call was a turn of this episode
    # the first connection's session was closed with it: its key is unknown now
    assert "Unknown session_id" in own[1]["data"]["error"]["message"]


@pytest.mark.parametrize("env_id", [CALCULATOR, GUESS])
def test_openenv_validate_passes(env_id: str) -> None:
    with served(env_id) as server:
        run = subprocess.run(
            [sys.executable, "-m", "openenv.cli", "validate", "--url", server.url, "--json"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    report = json.loads(run.stdout)
    failed = [c["id"] for c in report["criteria"] if not c["passed"]]
    assert report["passed"] is True, failed
