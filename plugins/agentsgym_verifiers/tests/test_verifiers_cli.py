"""A verifiers taskset from the command line: rollout (and --resume), eval, and both
trainers, as for any env."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agentsgym.testing import run_cli
from verifiers_fixtures import MODEL, TASKSETS, TOKENIZER, scripted_model

pytestmark = pytest.mark.timeout(1800)  # the first test may build verifiers' venv

ENV = "verifiers://addition_v1"


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _env_config(python: str, **extra: Any) -> list[str]:
    settings = {
        "python": python,
        "python_path": [str(TASKSETS)],
        "taskset": {"num_tasks": 3},
        "env": {"agent": {"harness": {"id": "null"}}},
        "sampling": {"max_tokens": 6},
        **extra,
    }
    return [
        part
        for key, value in settings.items()
        for part in ("--env-config", f"{key}={json.dumps(value)}")
    ]


def _openai_agent(base_url: str) -> list[str]:
    """The scripted model server as the run's agent: the gateway fronts it."""
    return [
        "--agent",
        "openai",
        "--agent-option",
        f"base_url={base_url}",
        "--agent-option",
        f"model={MODEL}",
    ]


def _answer(messages: list[dict[str, Any]]) -> str:
    a, b = map(int, re.findall(r"\d+", messages[-1]["content"])[:2])
    return str(a + b)


def test_rollout_and_resume(verifiers_python_path: str, tmp_path: Path) -> None:
    out = tmp_path / "rollout.jsonl"
    with scripted_model(_answer) as server:
        args = (
            "rollout",
            ENV,
            *_env_config(verifiers_python_path),
            *_openai_agent(server.base_url),
            "--tokenizer",
            TOKENIZER,
            "--num-tasks",
            "3",
            "--num-rollouts",
            "2",
            "--out",
            str(out),
        )
        first = run_cli(*args)
        assert first.code == 0, first.output
        written = out.read_text()
        again = run_cli(*args, "--resume")
        assert again.code == 0, again.output
    assert out.read_text() == written  # nothing was missing: nothing played again
    rows = _rows(out)
    assert {(r["task_index"], r["rollout_index"]) for r in rows} == {
        (t, r) for t in range(3) for r in range(2)
    }
    for row in rows:
        assert row["error"] is None
        assert row["env_id"] == ENV
        assert row["final_reward"] == 1.0
        assert row["metrics"]["verifiers/exact_match"] == 1.0
        assert row["step_token_sources"] == ["server"]


def test_eval(verifiers_python_path: str, tmp_path: Path) -> None:
    out = tmp_path / "eval.jsonl"
    with scripted_model(_answer) as server:
        result = run_cli(
            "eval",
            ENV,
            *_env_config(verifiers_python_path),
            *_openai_agent(server.base_url),
            "--tokenizer",
            TOKENIZER,
            "--num-tasks",
            "2",
            "--num-rollouts",
            "2",
            "--out",
            str(out),
        )
    assert result.code == 0, result.output
    assert "1.000" in result.output  # every answer right: accuracy and pass@k of 1
    assert len(_rows(out)) >= 2


@pytest.mark.parametrize("trainer", ["per-token-grpo", "trl-grpo"])
def test_train(
    verifiers_python_path: str, tmp_path: Path, trainer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trainer's policy (the tiny model) is verifiers' model, through the gateway."""
    pytest.importorskip("trl", reason="the trainers need agentsgym-trl's dependencies")
    # `train` plays the env's dataset rows, which name the env by its URL; it has no
    # --allow-remote-envs flag (as for http:// envs), so the variable allows this one.
    monkeypatch.setenv("AGENTSGYM_ALLOW_REMOTE_ENVS", ENV)
    run = tmp_path / "run"
    result = run_cli(
        "train",
        ENV,
        *_env_config(verifiers_python_path),
        "--trainer",
        trainer,
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
        str(run),
    )
    assert result.code == 0, result.output
    steps = [s for s in _rows(run / "train_log.jsonl") if "step" in s]
    assert len(steps) >= 2
