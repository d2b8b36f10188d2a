"""Tools from an MCP server (the mcp SDK, stdio), played in an env: their schemas reach
the template, calls go to the server, its errors become Error: tool messages."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import agentsgym
from agentsgym import StepResult, hookimpl
from agentsgym_tools import MCPTools, ScriptedToolAgent, ToolDeclarationError, ToolEnv

SERVER = [str(Path(__file__).with_name("mcp_calc_server.py"))]


class MCPCalcEnv(ToolEnv):
    """Asks for 2 + 3 with the MCP server's tools."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.mcp = MCPTools(sys.executable, SERVER)

    def get_tools(self, task_data: dict[str, Any]) -> Any:
        return self.mcp.tools()

    def close(self) -> None:
        self.mcp.close()

    @hookimpl
    def initialize_episode(self, session_id: str, task_data: dict[str, Any]) -> dict[str, Any]:
        return {}

    @hookimpl
    def format_prompt(self, state: Any, step: int) -> str:
        return "What is 2 + 3?"

    @hookimpl
    def step_episode(self, state: Any, action: str) -> StepResult:
        return StepResult(state, float("5" in action), True, {})


def test_an_env_plays_the_tools_of_an_mcp_server() -> None:
    env = MCPCalcEnv(tokenizer=agentsgym.load_tokenizer(agentsgym.DEFAULT_TOKENIZER))
    try:
        tools = env.mcp.tools()
        assert [t.name for t in tools] == ["add", "fail"]
        assert tools[0].parameters["required"] == ["a", "b"]
        script = [[("add", {"a": 2, "b": 3}), ("fail", {"reason": "no"}), ("add", {"a": "x"})], "5"]
        batch = env.run_trial([{}], ScriptedToolAgent(script), num_rollouts=2)
    finally:
        env.close()
    for episode in batch.episodes:
        assert episode.ok and episode.final_reward == 1.0, episode.error
        answers = [m["content"] for m in episode.messages if m["role"] == "tool"]
        assert answers[0] == "5"
        assert answers[1].startswith("Error: fail raised MCPToolError: Error executing tool fail")
        assert (
            answers[2].startswith("Error: add raised MCPToolError")
            and "valid integer" in answers[2]
        )
        assert len(episode.segments) == 1
    declared = env.chat.with_tools([t.schema for t in tools]).render([], add_generation_prompt=True)
    assert '"name": "add"' in declared  # the template declared the server's tools


def test_an_mcp_server_that_does_not_start_is_a_clear_error() -> None:
    broken = MCPTools(sys.executable, ["-c", "raise SystemExit(3)"], start_timeout_seconds=30)
    with pytest.raises(ToolDeclarationError, match="could not list the tools of the MCP server"):
        broken.tools()


def test_one_session_per_loop_and_close_stops_it() -> None:
    mcp = MCPTools(sys.executable, SERVER)

    async def twice() -> list[str]:
        return list(
            await asyncio.gather(
                mcp.call("add", {"a": 1, "b": 2}), mcp.call("add", {"a": 3, "b": 4})
            )
        )

    assert asyncio.run(twice()) == ["3", "7"]
    assert len(mcp._connections) == 1
    mcp.close()
    assert mcp._connections == {}


def test_a_secret_in_the_server_command_stays_out_of_the_error() -> None:
    broken = MCPTools(sys.executable, ["-c", "raise SystemExit(3)", "--api-key", "sk-planted-123"])
    with pytest.raises(ToolDeclarationError) as failed:
        broken.tools()
    assert "sk-planted-123" not in str(failed.value) and "--api-key" in str(failed.value)
