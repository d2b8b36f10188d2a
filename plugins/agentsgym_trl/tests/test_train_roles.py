"""``agentsgym train`` on an env with roles: self-play, each trainable role a group of
its own; trl-grpo (one completion per prompt) trains one role at a time."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")

from agentsgym.testing import run_cli
from haggle_package import haggle_installed, haggle_without_buyer_agent_fixture  # noqa: F401 (a fixture)

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
    # and each role's win, draw and loss rates, from its games' outcomes
    x_wins = [r["metrics"]["outcome"] > 0 for r in rows if r["role"] == "x"]
    assert step["win_rate/x"] == pytest.approx(sum(x_wins) / len(x_wins))
    rates = [step[f"{name}_rate/x"] for name in ("win", "draw", "loss")]
    assert sum(rates) == pytest.approx(1.0)


def test_trl_grpo_trains_one_role_and_says_so_when_given_two(tmp_path: Path) -> None:
    args = [*GAME, *SMALL, *SHORT, "--trainer", "trl-grpo"]
    both = run_cli(*args, "--output-dir", str(tmp_path / "both"))
    assert both.code != 0 and "trains several roles (x, o)" in both.output
    assert not (tmp_path / "both" / "played.jsonl").read_text()  # refused before playing
    one = run_cli(
        *args, "--env-config", 'trainable_roles=["x"]', "--output-dir", str(tmp_path / "x")
    )
    assert one.code == 0, one.output
    assert played_roles(tmp_path / "x") == {"x"} and groups_trained(one.output) == 2


@pytest.fixture
def haggle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from haggle_installed(tmp_path, monkeypatch)


def test_trl_grpo_refusal_advice_works_for_a_third_party_env(haggle: str, tmp_path: Path) -> None:
    """A package's env (tests/haggle_package.py, whose config class does not declare
    trainable_roles): both roles trained is refused before anything plays, and the
    refusal's advice, pasted, trains one."""
    args = ["train", haggle, "--model", "tiny", "--max-steps", "1", *SMALL, *SHORT]
    both = ["--env-config", 'trainable_roles=["seller","buyer"]']
    refused = run_cli(*args, "--trainer", "trl-grpo", *both, "--output-dir", str(tmp_path / "a"))
    assert refused.code != 0
    assert "haggle/Haggle-v0 trains several roles (seller, buyer)" in refused.output
    advice = "--env-config trainable_roles='[\"seller\"]'"
    assert advice in refused.output
    assert not (tmp_path / "a" / "played.jsonl").read_text()
    one = ["--env-config", 'trainable_roles=["seller"]']  # the advice, as a shell passes it
    trained = run_cli(*args, "--trainer", "trl-grpo", *one, "--output-dir", str(tmp_path / "b"))
    assert trained.code == 0, trained.output
    assert groups_trained(trained.output) == 2
    # per-token-grpo trains both roles, a group each
    every = run_cli(
        *args, "--trainer", "per-token-grpo", *both, "--output-dir", str(tmp_path / "c")
    )
    assert every.code == 0, every.output
    assert groups_trained(every.output) == 4


def test_a_dataset_sink_plays_each_role_with_the_agent_rollout_would(
    haggle: str, tmp_path: Path
) -> None:
    """No --agent and no env default agent: the sink plays each role with its own default
    agent, as rollout does, and writes the trained role's rows."""
    out = tmp_path / "sink"
    args = ["train", haggle, "--trainer", "dataset-sink", "--max-steps", "1", *SMALL]
    result = run_cli(*args, "--output-dir", str(out))
    assert result.code == 0, result.output
    assert (out / "rollouts.parquet").is_file()
    assert played_roles(out) == {"seller"}


def test_a_dataset_sink_names_a_role_that_has_no_agent(
    haggle_without_buyer_agent: str, tmp_path: Path
) -> None:
    """The buyer (not trained) has no default agent: refused before anything is played,
    naming the role and the flag; with that flag, the sink writes its rows."""
    args = ["train", haggle_without_buyer_agent, "--trainer", "dataset-sink", "--max-steps", "1"]
    refused = run_cli(*args, *SMALL, "--output-dir", str(tmp_path / "a"))
    assert refused.code != 0
    said = " ".join(refused.output.split())
    assert "its role 'buyer' declares none: give --agent buyer=AGENT" in said
    assert not (tmp_path / "a" / "played.jsonl").exists()
    given = ["--agent", "buyer=haggle/buyer"]
    played = run_cli(*args, *SMALL, *given, "--output-dir", str(tmp_path / "b"))
    assert played.code == 0, played.output
    assert (tmp_path / "b" / "rollouts.parquet").is_file()
    assert played_roles(tmp_path / "b") == {"seller"}
