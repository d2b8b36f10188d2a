"""The views show what a tool-call turn called, and replies cut at the generation limit.

A tool-call turn often has no content: its panel shows ``call name(arguments)`` lines
(the terminal and the page alike), and the calls are searched like message text. A
reply cut at the agent's length limit (``info["reply_truncated"]``) shows on the
``truncated`` line and its step, not as ``truncated no``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import agentsgym
from agentsgym import AgentAction, FunctionAgent
from agentsgym.cli import build_app
from agentsgym.output import write_records
from agentsgym_viewer import load_trajectories
from agentsgym_viewer.html import episode_data
from viewer_episodes import GUESS

pytestmark = pytest.mark.timeout(120)

CALCULATOR = "tools/Calculator-v0"


def call(name: str, arguments: Any, call_id: str = "call_0") -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}, "id": call_id}


def tool_record() -> dict[str, Any]:
    """A Calculator rollout row as ``agentsgym rollout --out`` writes it: the parser's
    calls carry an object, a chat server's carry JSON text."""
    return {
        "session_id": "s-tools",
        "env_id": CALCULATOR,
        "task_index": 0,
        "rollout_index": 0,
        "episode_index": 0,
        "task_data": {"a": 874},
        "final_reward": 1.0,
        "num_turns": 3,
        "truncated": False,
        "free_shot": False,
        "error": None,
        "metrics": {},
        "messages": [
            {"role": "user", "content": "What is 874 * 404 + 786? Use the tools."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [call("multiply", {"a": 874, "b": 404})],
            },
            {"role": "tool", "tool_call_id": "call_0", "name": "multiply", "content": "353096"},
            {
                "role": "assistant",
                "content": "Now the sum.",
                "tool_calls": [call("add", '{"a": 353096, "b": 786}')],
            },
            {"role": "tool", "tool_call_id": "call_0", "name": "add", "content": "353882"},
            {"role": "assistant", "content": "The result is \\boxed{353882}."},
        ],
        "step_infos": [{"tool_calls": 1}, {"tool_calls": 1}, {"answer": "353882", "correct": True}],
    }


def view(*args: str) -> str:
    result = CliRunner().invoke(build_app(), ["view", *args], env={"COLUMNS": "200"})
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_a_tool_call_turn_shows_its_calls(tmp_path: Path, suffix: str) -> None:
    out = write_records([tool_record()], tmp_path / f"tools{suffix}")
    episode = load_trajectories(out).episodes[0]
    calls = [m.call_texts for m in episode.messages if m.role == "assistant"]
    assert calls == [['multiply({"a": 874, "b": 404})'], ['add({"a": 353096, "b": 786})'], []]
    assert [m.title for m in episode.messages if m.role == "tool"] == [
        "tool \u00b7 multiply",
        "tool \u00b7 add",
    ]
    output = view(str(out), "--no-tokens")
    assert 'call multiply({"a": 874, "b": 404})' in output
    assert 'call add({"a": 353096, "b": 786})' in output and "Now the sum." in output
    assert "tool \u00b7 multiply" in output
    # the calls are searched like message text, counted the same on the page
    assert "1 match in this episode" in view(str(out), "--no-tokens", "--search", "multiply(")
    data = episode_data(episode)
    assert data["msgs"][1] == ["assistant", "", ['multiply({"a": 874, "b": 404})'], "assistant"]
    assert data["msgs"][2][3] == "tool \u00b7 multiply"


def test_a_call_of_an_unknown_shape_is_shown_not_dropped(tmp_path: Path) -> None:
    record = tool_record()
    record["messages"][1]["tool_calls"] = [{"name": "flat", "arguments": {"x": 1}}, "odd"]
    out = write_records([record], tmp_path / "tools.jsonl")
    episode = load_trajectories(out).episodes[0]
    assert episode.messages[1].call_texts == ['flat({"x": 1})', "?(odd)"]


def test_a_reply_cut_at_the_limit_shows_in_the_eval_view(tmp_path: Path) -> None:
    evaluate = pytest.importorskip(
        "agentsgym_eval", reason="agentsgym-eval writes eval files"
    ).evaluate

    def cut_off(messages: Any, state: Any) -> tuple[AgentAction, Any]:
        # the right answer, then the length limit: judged correct, yet cut
        return AgentAction(text="My guess is [50]", truncated=True), state

    env = agentsgym.make(GUESS)
    samples, report = evaluate(env, FunctionAgent(cut_off), [{"target": 50}], 1)
    out = write_records([s.model_dump() for s in samples], tmp_path / "results.jsonl")
    (tmp_path / "results.summary.json").write_text(json.dumps(report.model_dump()))
    episode = load_trajectories(out).episodes[0]
    assert episode.kind == "eval" and episode.correct and not episode.truncated
    assert episode.cut_replies == [0]
    assert episode.truncation == "1 reply cut at the generation limit (step 0)"
    output = view(str(out), "--episode", "0")
    assert "truncated         no" not in output
    assert "1 reply cut at the generation limit (step 0)" in output
    assert "reply-cut" in output and "step 0  reply cut at the generation limit" in output
    assert episode_data(episode)["cut"] == 1
