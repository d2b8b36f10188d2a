"""The example tool env, played end to end: tool turns, per-task tools, check_env, the
CLI, and a reply whose calls cannot be read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agentsgym
from agentsgym import ScriptedAgent
from agentsgym.testing import check_env, run_cli
from agentsgym_tools import ScriptedToolAgent
from agentsgym_tools.calculator import calculator_solver

CALCULATOR = "tools/Calculator-v0"


def test_the_solver_calls_the_tools_and_answers() -> None:
    env = agentsgym.make(CALCULATOR, tokenizer=agentsgym.DEFAULT_TOKENIZER)
    batch = env.run_trial([{"a": 12, "b": 34, "c": 5}], calculator_solver(), num_rollouts=2)
    for episode in batch.episodes:
        assert episode.ok and episode.final_reward == 1.0, episode.error
        roles = [m["role"] for m in episode.messages]
        assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
        assert [m["content"] for m in episode.messages if m["role"] == "tool"] == ["408", "413"]
        assert [s.info.get("tool_calls") for s in episode.steps] == [1, 1, None]
        assert [s.reward for s in episode.steps] == [0.0, 0.0, 1.0]
        assert len(episode.segments) == 1 and episode.segments[0].agent_mask.sum() > 0


def test_tools_differ_per_task_and_a_missing_tool_is_an_error_message() -> None:
    env = agentsgym.make(CALCULATOR, tokenizer=agentsgym.DEFAULT_TOKENIZER)
    assert [s["function"]["name"] for s in env.episode_tools({}).schemas] == ["multiply", "add"]
    only_add = env.episode_tools({"tools": ["add"]})
    assert [s["function"]["name"] for s in only_add.schemas] == ["add"]
    batch = env.run_trial([{"seed": 3, "tools": ["add"]}], calculator_solver(), num_rollouts=1)
    episode = batch.episodes[0]
    assert episode.ok, episode.error
    first_answer = next(m for m in episode.messages if m["role"] == "tool")
    assert first_answer["content"].startswith("Error: there is no tool named 'multiply'")
    assert episode.final_reward == 0.0  # it answered with what the error gave it


def test_unreadable_calls_and_plain_replies() -> None:
    env = agentsgym.make(
        CALCULATOR, tokenizer=agentsgym.DEFAULT_TOKENIZER, env_config={"max_steps_per_episode": 3}
    )
    agent = ScriptedAgent(["<tool_call>\n{not json\n</tool_call>", "\\boxed{7}"])
    episode = env.run_trial([{"a": 1, "b": 2, "c": 5}], agent).episodes[0]
    assert episode.ok, episode.error
    assert episode.messages[2]["role"] == "user"
    assert episode.messages[2]["content"].startswith("Error: your tool call could not be parsed")
    assert episode.final_reward == 1.0 and len(episode.steps) == 2
    assert episode.steps[0].info["tool_calls"] == 0  # attempted, but none could be read


def test_check_env_passes_and_the_cli_plays_it(tmp_path) -> None:
    report = check_env(CALCULATOR)
    assert report.passed, report.failures
    out = tmp_path / "calc.jsonl"
    result = run_cli("rollout", CALCULATOR, "--num-tasks", "2", "--out", str(out))
    assert result.code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 4 and all(row["final_reward"] == 1.0 for row in rows)  # 2 tasks x 2


def test_describe_and_list_envs_show_the_tools() -> None:
    described = run_cli("describe", CALCULATOR, "--json")
    assert described.code == 0, described.output
    description = json.loads(described.stdout)
    assert description["docs"].startswith("The example tool env: each task asks for a * b + c")
    tools = {t["name"]: t for t in description["tools"]}
    assert set(tools) == {"add", "multiply"}
    assert tools["add"]["description"] == "Add two integers."
    assert tools["add"]["parameters"]["properties"]["a"]["type"] == "integer"
    assert "  add(a, b): Add two integers." in run_cli("describe", CALCULATOR).stdout
    listed = json.loads(run_cli("list-envs", "--json", "--verbose").stdout)
    assert {t["name"] for t in next(i for i in listed if i.get("id") == CALCULATOR)["tools"]} == {
        "add",
        "multiply",
    }


@pytest.mark.parametrize("pack", ["qwen2.5-1.5b-instruct", "llama-3.2-instruct", "qwen3-4b"])
def test_check_env_passes_on_every_tokenizer_pack(pack: str) -> None:
    folder = Path(__file__).resolve().parents[3].parent / "shared" / "tokenizers" / pack
    if not (folder / "tokenizer.json").exists():
        pytest.skip(f"tokenizer pack {pack} not found at {folder} (../shared is absent)")
    tokenizer = agentsgym.load_tokenizer(str(folder))
    for token_out in (False, True):
        agent = calculator_solver(tokenizer, token_out=token_out)
        report = check_env(CALCULATOR, tokenizer=tokenizer, agent=agent, raise_on_failure=False)
        assert report.passed, (token_out, report.failures)


@pytest.mark.parametrize("pack", ["qwen2.5-1.5b-instruct", "llama-3.2-instruct", "qwen3-4b"])
def test_the_default_agent_solves_it_on_every_tokenizer_pack(pack: str, tmp_path: Path) -> None:
    """The default agent returns calls as a chat server does; the runner writes them as
    the pack's template does, so every episode is won, in one segment."""
    folder = Path(__file__).resolve().parents[3].parent / "shared" / "tokenizers" / pack
    if not (folder / "tokenizer.json").exists():
        pytest.skip(f"tokenizer pack {pack} not found at {folder} (../shared is absent)")
    out = tmp_path / "calc.jsonl"
    result = run_cli(
        "rollout", CALCULATOR, "--tokenizer", str(folder), "--num-tasks", "3", "--out", str(out)
    )
    assert result.code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 6 and all(row["final_reward"] == 1.0 for row in rows), rows[0]
    assert all(row["num_segments"] == 1 for row in rows)
    assert check_env(CALCULATOR, tokenizer=str(folder), raise_on_failure=False).passed


def test_tools_that_cannot_be_had_fail_the_episode_not_the_run() -> None:
    from agentsgym_tools.calculator import CalculatorEnv

    class Unreachable(CalculatorEnv):
        def get_tools(self, task_data: dict) -> list:
            raise ConnectionError("the tool server is down")

    env = Unreachable(agentsgym.load_tokenizer(agentsgym.DEFAULT_TOKENIZER))
    batch = env.run_trial([{"seed": 1}, {"seed": 2}], calculator_solver(), num_rollouts=1)
    assert len(batch.failed) == 2
    assert all("ConnectionError: the tool server is down" in e.error for e in batch.failed)


def test_two_calls_on_a_one_call_template_are_answered_not_fatal() -> None:
    """Llama-3.2's template raises on a reply of two calls; the model is told instead."""
    folder = Path(__file__).resolve().parents[3].parent / "shared" / "tokenizers"
    folder = folder / "llama-3.2-instruct"
    if not (folder / "tokenizer.json").exists():
        pytest.skip(f"tokenizer pack llama-3.2-instruct not found at {folder}")
    env = agentsgym.make(CALCULATOR, tokenizer=str(folder))
    assert env.one_call_per_reply
    two = [("multiply", {"a": 1, "b": 2}), ("add", {"a": 2, "b": 5})]
    for agent in (ScriptedToolAgent([two, "\\boxed{7}"]), calculator_solver(str(folder))):
        episode = env.run_trial([{"a": 1, "b": 2, "c": 5}], agent).all_episodes[0]
        assert episode.ok, episode.error
        assert episode.final_reward == 1.0
    episode = env.run_trial(
        [{"a": 1, "b": 2, "c": 5}], ScriptedToolAgent([two, "\\boxed{7}"])
    ).all_episodes[0]
    assert [m["role"] for m in episode.messages] == ["user", "assistant", "user", "assistant"]
    assert episode.messages[2]["content"] == (
        "Error: this model's chat template allows one tool call per reply, and this reply "
        "made 2; none was run. Call one tool, read its result, then call the next"
    )


def test_the_longest_tool_answer_is_bounded_both_ways() -> None:
    from pydantic import ValidationError

    from agentsgym_tools.env import ToolEnvConfig

    assert ToolEnvConfig(max_tool_result_chars=1_000_000).max_tool_result_chars == 1_000_000
    for refused in (99, 1_000_001):
        with pytest.raises(ValidationError, match="max_tool_result_chars"):
            ToolEnvConfig(max_tool_result_chars=refused)
