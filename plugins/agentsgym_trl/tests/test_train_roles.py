"""``agentsgym train`` on an env with roles: self-play, each trainable role a group of
its own; trl-grpo (one completion per prompt) trains one role at a time."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")

from agentsgym.testing import run_cli

GAME = ["train", "classical/TicTacToe-v0", "--model", "tiny", "--max-steps", "1"]
SMALL = ["--num-tasks", "2", "--num-rollouts", "2", "--tasks-per-step", "2"]
SHORT = ["--max-new-tokens", "4"]


def played_roles(out: Path) -> set[str]:
    return {json.loads(line)["role"] for line in (out / "played.jsonl").read_text().splitlines()}


def groups_trained(output: str) -> int:
    """The groups a run's summary counts ("0 of N (in ..." on one line)."""
    line = next(line for line in output.splitlines() if "groups with differing" in line)
    return int(re.search(r"of (\d+) \(in", line).group(1))  # type: ignore[union-attr]


def test_per_token_grpo_trains_every_role_in_self_play(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = run_cli(*GAME, *SMALL, *SHORT, "--trainer", "per-token-grpo", "--output-dir", str(out))
    assert result.code == 0, result.output
    assert groups_trained(result.output) == 4  # 2 tasks x 2 roles: a group per task and role
    # the tiny model's x forfeits at once, so o never acts: a role without tokens has no row
    assert played_roles(out) <= {"x", "o"} and "x" in played_roles(out)
    # the step log has each role's mean reward (reward/<role>)
    (step,) = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    rows = [json.loads(line) for line in (out / "played.jsonl").read_text().splitlines()]
    x_rewards = {r["session_id"]: r["final_reward"] for r in rows if r["role"] == "x"}
    assert step["reward/x"] == pytest.approx(sum(x_rewards.values()) / len(x_rewards))
    assert "reward/o" in step


def test_trl_grpo_trains_one_role_and_says_so_when_given_two(tmp_path: Path) -> None:
    args = [*GAME, *SMALL, *SHORT, "--trainer", "trl-grpo"]
    both = run_cli(*args, "--output-dir", str(tmp_path / "both"))
    assert both.code != 0 and "several trainable roles (x, o)" in both.output
    one = run_cli(
        *args, "--env-config", 'trainable_roles=["x"]', "--output-dir", str(tmp_path / "x")
    )
    assert one.code == 0, one.output
    assert played_roles(tmp_path / "x") == {"x"} and groups_trained(one.output) == 2
