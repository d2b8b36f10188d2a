"""The agentsgym command line, run as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import datasets
import pytest

import agentsgym


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentsgym", *args], capture_output=True, text=True, cwd=cwd
    )


def test_list_envs_json_has_the_documented_fields() -> None:
    result = cli("list-envs", "--json")
    assert result.returncode == 0, result.stderr
    items = json.loads(result.stdout)
    guess = next(i for i in items if i.get("id") == "agentsgym/GuessTheNumber-v0")
    for key in ("id", "distribution", "version", "entry_point", "description"):
        assert guess[key], key
    assert guess["distribution"] == "agentsgym"


def test_list_envs_table_and_agents() -> None:
    assert "agentsgym/GuessTheNumber-v0" in cli("list-envs").stdout
    assert "agentsgym/bisect" in cli("list-agents").stdout


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_rollout_writes_a_file_datasets_can_load(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"rollouts{suffix}"
    result = cli(
        "rollout", "agentsgym/GuessTheNumber-v0", "--num-tasks", "3", "--num-rollouts", "2",
        "--out", str(out),
    )
    assert result.returncode == 0, result.stderr
    assert "6 trajectories written" in result.stdout and "reward" in result.stdout
    loaded = (
        datasets.Dataset.from_parquet(str(out)) if suffix == ".parquet"
        else datasets.Dataset.from_json(str(out))
    )
    assert loaded.num_rows == 6
    row = loaded[0]
    assert row["final_reward"] == 1.0 and row["num_turns"] >= 1
    assert len(row["full_token_ids"]) == len(row["agent_token_mask"]) == len(row["per_token_rewards"])
    assert row["messages"][0]["role"] == "user"
    tokenizer = agentsgym.load_tokenizer("agentsgym/tiny-chatml")
    assert row["full_token_ids"] == tokenizer.apply_chat_template(row["messages"], tokenize=True)["input_ids"]


def test_rollout_without_tokenizer_and_with_agent_options(tmp_path: Path) -> None:
    out = tmp_path / "r.parquet"
    result = cli(
        "rollout", "agentsgym/GuessTheNumber-v0", "--num-tasks", "1", "--num-rollouts", "1",
        "--tokenizer", "none", "--agent", "scripted", "--agent-option", 'replies=["[1]", "[2]"]',
        "--env-config", "max_steps_per_episode=2", "--out", str(out),
    )
    assert result.returncode == 0, result.stderr
    row = datasets.Dataset.from_parquet(str(out))[0]
    assert [m["content"] for m in row["messages"] if m["role"] == "assistant"] == ["[1]", "[2]"]
    assert row["full_token_ids"] is None


def test_rollout_of_a_mixed_rows_file(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        json.dumps({"env_class_path": "agentsgym/GuessTheNumber-v0", "env_config": {"high": 4}, "task_data": {"target": 2}}) + "\n"
        + json.dumps({"env_class_path": "agentsgym/GuessTheNumber-v0", "env_config": {}, "task_data": {"seed": 3}}) + "\n"
    )
    out = tmp_path / "r.parquet"
    result = cli("rollout", "--dataset", str(rows), "--agent", "agentsgym/bisect", "--out", str(out))
    assert result.returncode == 0, result.stderr
    loaded = datasets.Dataset.from_parquet(str(out))
    assert loaded["group_index"] == [0, 0, 1, 1] and set(loaded["final_reward"]) == {1.0}


def test_unknown_env_is_one_readable_error(tmp_path: Path) -> None:
    result = cli("rollout", "agentsgym/GuessNumber-v0", "--out", str(tmp_path / "x.parquet"))
    assert result.returncode == 2
    assert "Did you mean: agentsgym/GuessTheNumber-v0" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_output_suffix_fails_before_playing(tmp_path: Path) -> None:
    result = cli("rollout", "agentsgym/GuessTheNumber-v0", "--out", str(tmp_path / "x.csv"))
    assert result.returncode == 2 and ".parquet or .jsonl" in result.stderr


def test_check_env_command_passes_the_builtin_env() -> None:
    result = cli("check-env", "agentsgym/GuessTheNumber-v0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "passes check_env" in result.stdout


def test_ctrl_c_keeps_the_episodes_that_finished(tmp_path: Path) -> None:
    import os
    import signal
    import time

    from fake_dists import STALLING_AGENT, install_fake_dist

    site = tmp_path / "site"
    install_fake_dist(site, "agentsgym-stall", "agentsgym_stall", STALLING_AGENT)
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(
        json.dumps({"env_class_path": "agentsgym/GuessTheNumber-v0", "env_config": {"high": 10},
                    "task_data": {"target": t}}) + "\n"
        for t in (1, 2, 3, 7)
    ))
    marker, out = tmp_path / "stalled", tmp_path / "r.jsonl"
    env = {**os.environ, "PYTHONPATH": str(site), "STALL_MARKER": str(marker)}
    process = subprocess.Popen(
        [sys.executable, "-m", "agentsgym", "rollout", "--dataset", str(rows), "--agent",
         "stall/counting-up", "--num-rollouts", "1", "--max-concurrency", "1", "--out", str(out)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    assert marker.exists(), process.communicate()
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted" in stdout and "3 of 4 trials" in stdout and "--resume" in stdout
    written = datasets.Dataset.from_json(str(out))
    assert sorted(t["target"] for t in written["task_data"]) == [1, 2, 3]
    assert set(written["final_reward"]) == {1.0}
