"""Harness envs from the command line: rollout (with --resume), and per-token-grpo training."""

from __future__ import annotations

import json
from pathlib import Path

from agentsgym.testing import run_cli
from agentsgym_serve.model_server import OpenAICompatServer, ScriptedPolicy
from gateway_fixtures import MODEL, TOKENIZER

ADD_CALL = '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_rollout_runs_programs_against_an_openai_agents_server(tmp_path: Path) -> None:
    policy = ScriptedPolicy(
        lambda messages: "done" if messages[-1]["role"] == "tool" else ADD_CALL,
        tokenizer=TOKENIZER,
    )
    out = tmp_path / "rollout.jsonl"
    with OpenAICompatServer(policy, models=[MODEL]) as server:
        args = (
            "rollout",
            "gateway/OpenAIToolLoop-v0",
            "--agent",
            "openai",
            "--agent-option",
            f"base_url={server.base_url}",
            "--agent-option",
            f"model={MODEL}",
            "--env-config",
            "tool_parser=hermes",
            "--tokenizer",
            TOKENIZER,
            "--num-tasks",
            "2",
            "--num-rollouts",
            "2",
            "--out",
            str(out),
        )
        result = run_cli(*args)
        assert result.code == 0, result.output
        again = run_cli(*args, "--resume")
        assert again.code == 0, again.output
    rows = _rows(out)
    # one row per segment: the template writes the tool call otherwise than the model
    # sampled it, so the second call starts a segment of its own (never a mismatch)
    assert len({(r["task_index"], r["rollout_index"]) for r in rows}) == 4
    assert len(rows) == 4 * rows[0]["num_segments"]
    for row in rows:
        assert row["error"] is None
        assert row["num_turns"] == 2 and row["step_token_sources"] == ["server", "server"]
        assert row["metrics"]["sampled_token_share"] == 1.0
        assert row["step_infos"][0]["tool_calls"] == 1


def test_per_token_grpo_trains_on_a_harness_env(tmp_path: Path) -> None:
    result = run_cli(
        "train",
        "gateway/OpenAIToolLoop-v0",
        "--trainer",
        "per-token-grpo",
        "--model",
        "tiny",
        "--max-steps",
        "2",
        "--num-tasks",
        "2",
        "--num-rollouts",
        "2",
        "--max-new-tokens",
        "6",
        "--output-dir",
        str(tmp_path / "run"),
    )
    assert result.code == 0, result.output
    steps = _rows(tmp_path / "run" / "train_log.jsonl")
    assert len([s for s in steps if "step" in s]) >= 2
    played = _rows(tmp_path / "run" / "played.jsonl")
    assert len(played) == 8 and all(r["error"] is None for r in played)
    assert {r["env_id"] for r in played} == {"gateway/OpenAIToolLoop-v0"}
