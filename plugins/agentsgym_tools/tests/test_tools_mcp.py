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
from agentsgym_tools import (
    MCPTools,
    ScriptedToolAgent,
    ToolDeclarationError,
    ToolEnv,
    ToolUnavailableError,
)

SERVER = [str(Path(__file__).with_name("mcp_calc_server.py"))]


class MCPCalcEnv(ToolEnv):
    """Asks for 2 + 3 with the MCP server's tools."""

    def __init__(self, *args: Any, inject: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.mcp = MCPTools(sys.executable, SERVER, inject=inject)

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


def _answers(episode: Any) -> list[str]:
    return [m["content"] for m in episode.messages if m["role"] == "tool"]


def test_an_env_plays_the_tools_of_an_mcp_server(capfd: Any) -> None:
    env = MCPCalcEnv(tokenizer=agentsgym.load_tokenizer(agentsgym.DEFAULT_TOKENIZER))
    try:
        tools = env.mcp.tools()
        started = env.mcp.host.starts
        assert [t.name for t in tools][:3] == ["add", "refuse", "fail"]
        assert tools[0].parameters["required"] == ["a", "b"]
        calls = [
            ("add", {"a": 2, "b": 3}),
            ("refuse", {"reason": "the ledger is closed"}),
            ("fail", {"reason": "no"}),
            ("add", {"a": "x"}),
        ]
        batch = env.run_trial([{}, {}], ScriptedToolAgent([calls, "5"]), num_rollouts=2)
        assert env.mcp.host.starts == started  # one server for the env's life, every episode
    finally:
        env.close()
    for episode in batch.episodes:
        assert episode.ok and episode.final_reward == 1.0, episode.error
        answers = _answers(episode)
        assert answers[:3] == [
            "5",
            "Error: refuse: the ledger is closed",
            "Error: fail: it failed on the MCP server, which gave no reason",
        ]
        assert answers[3].startswith("Error: add: ") and "valid integer" in answers[3]
        assert len(episode.segments) == 1
    declared = env.chat.with_tools([t.schema for t in tools]).render([], add_generation_prompt=True)
    assert '"name": "add"' in declared  # the template declared the server's tools
    assert "Traceback" not in capfd.readouterr().err  # the server's log stays off the terminal


def test_injected_arguments_are_hidden_from_the_model() -> None:
    inject = {"seed": lambda context: context.task_data["seed"]}
    env = MCPCalcEnv(agentsgym.load_tokenizer(agentsgym.DEFAULT_TOKENIZER), inject=inject)
    try:
        balance = next(t for t in env.mcp.tools() if t.name == "balance")
        assert list(balance.parameters["properties"]) == ["account"]
        assert balance.parameters["required"] == ["account"]
        calls = [
            ("balance", {"account": "ACC-657"}),
            ("balance", {"acount": "ACC-657"}),
            ("balance", {"account": "ACC-657", "seed": 4}),
        ]
        episode = env.run_trial([{"seed": 3}], ScriptedToolAgent([calls, "5"])).episodes[0]
    finally:
        env.close()
    answers = _answers(episode)
    assert answers[0] == "100"
    assert answers[1].startswith("Error: balance: ") and "acount" in answers[1]
    assert "seed" not in answers[1] and "'acount': 'ACC-657'}" in answers[1]
    assert answers[2] == (
        "Error: bad arguments for balance: got an unexpected keyword argument 'seed'"
    )


def test_one_server_for_every_event_loop_and_close_stops_it() -> None:
    mcp = MCPTools(sys.executable, SERVER, env={"FOR": "one-server"}, linger_seconds=0)

    async def twice() -> list[str]:
        return list(await asyncio.gather(mcp.call("pid", {}), mcp.call("add", {"a": 3, "b": 4})))

    first_pid, seven = asyncio.run(twice())
    assert seven == "7" and len(mcp.tools()) == 6
    assert asyncio.run(mcp.call("pid", {})) == first_pid  # another loop, the same server
    assert mcp.host.starts == 1
    mcp.close()
    assert mcp.host.closed  # linger_seconds=0, and nobody else used it: stopped at once
    with pytest.raises(ToolUnavailableError, match="was closed"):
        asyncio.run(mcp.call("pid", {}))


def test_envs_built_again_reuse_the_lingering_server() -> None:
    def pid_of(mcp: MCPTools) -> str:
        return asyncio.run(mcp.call("pid", {}))

    first = MCPTools(sys.executable, SERVER, env={"FOR": "reuse"})
    second = MCPTools(sys.executable, SERVER, env={"FOR": "reuse"})
    other = MCPTools(sys.executable, SERVER, env={"FOR": "another server"}, linger_seconds=0)
    try:
        assert pid_of(first) == pid_of(second) != pid_of(other)
        pid = pid_of(first)
        first.close()
        second.close()  # the last user: the server lingers
        third = MCPTools(sys.executable, SERVER, env={"FOR": "reuse"}, linger_seconds=0)
        assert pid_of(third) == pid and third.host.starts == 1  # no second start
        third.close()
        assert third.host.closed
    finally:
        other.close()


def test_a_server_that_dies_fails_that_episode_and_is_started_again() -> None:
    env = MCPCalcEnv(tokenizer=agentsgym.load_tokenizer(agentsgym.DEFAULT_TOKENIZER))
    try:
        before = asyncio.run(env.mcp.call("pid", {}))
        started = env.mcp.host.starts
        dying = env.run_trial([{}], ScriptedToolAgent([[("die", {})], "5"])).all_episodes[0]
        assert not dying.ok and "ServerLost" in dying.error and "exited" in dying.error
        later = env.run_trial([{}], ScriptedToolAgent([[("pid", {})], "5"])).episodes[0]
        assert later.ok, later.error
        assert _answers(later)[0] != before  # a new process answered
        assert env.mcp.host.starts == started + 1
    finally:
        env.close()


def test_an_mcp_server_that_does_not_start_is_a_clear_error() -> None:
    broken = MCPTools(sys.executable, ["-c", "raise SystemExit(3)"], start_timeout_seconds=30)
    with pytest.raises(ToolDeclarationError, match="could not list the tools of the MCP server"):
        broken.tools()


def test_a_secret_in_the_server_command_stays_out_of_the_error() -> None:
    broken = MCPTools(sys.executable, ["-c", "raise SystemExit(3)", "--api-key", "sk-planted-123"])
    with pytest.raises(ToolDeclarationError) as failed:
        broken.tools()
    assert "sk-planted-123" not in str(failed.value) and "--api-key" in str(failed.value)


def test_injected_values_are_cut_out_of_any_error_text() -> None:
    from agentsgym_tools.mcp_tools import without_injected

    quoted = "input_value={'acount': 'ACC-657', 'seed': 3}, input_type=dict"
    assert (
        without_injected(quoted, {"seed": 3})
        == "input_value={'acount': 'ACC-657'}, input_type=dict"
    )
    assert without_injected('{"seed": "s-1", "x": 1} (seed=s-1)', {"seed": "s-1"}) == '{"x": 1} ()'
