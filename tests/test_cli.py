"""The agentsgym command line, run as a user runs it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import datasets
import pytest

import agentsgym
from agentsgym.testing import run_cli


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
    assert guess["distribution"] == "agentsgym-classical"


def test_list_envs_table_and_agents() -> None:
    assert "agentsgym/GuessTheNumber-v0" in cli("list-envs").stdout
    assert "agentsgym/bisect" in cli("list-agents").stdout


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_rollout_writes_a_file_datasets_can_load(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"rollouts{suffix}"
    result = run_cli(
        "rollout",
        "agentsgym/GuessTheNumber-v0",
        "--num-tasks",
        "3",
        "--num-rollouts",
        "2",
        "--out",
        str(out),
    )
    assert result.code == 0, result.output
    assert "6 trajectories written" in result.stdout and "reward" in result.stdout
    loaded = (
        datasets.Dataset.from_parquet(str(out))
        if suffix == ".parquet"
        else datasets.Dataset.from_json(str(out))
    )
    assert loaded.num_rows == 6
    row = loaded[0]
    assert row["final_reward"] == 1.0 and row["num_turns"] >= 1
    assert (
        len(row["full_token_ids"]) == len(row["agent_token_mask"]) == len(row["per_token_rewards"])
    )
    assert row["messages"][0]["role"] == "user"
    tokenizer = agentsgym.load_tokenizer("agentsgym/tiny-chatml")
    assert (
        row["full_token_ids"]
        == tokenizer.apply_chat_template(row["messages"], tokenize=True)["input_ids"]
    )


def test_rollout_without_tokenizer_and_with_agent_options(tmp_path: Path) -> None:
    out = tmp_path / "r.parquet"
    result = run_cli(
        "rollout",
        "agentsgym/GuessTheNumber-v0",
        "--num-tasks",
        "1",
        "--num-rollouts",
        "1",
        "--tokenizer",
        "none",
        "--agent",
        "scripted",
        "--agent-option",
        'replies=["[1]", "[2]"]',
        "--env-config",
        "max_steps_per_episode=2",
        "--out",
        str(out),
    )
    assert result.code == 0, result.output
    row = datasets.Dataset.from_parquet(str(out))[0]
    assert [m["content"] for m in row["messages"] if m["role"] == "assistant"] == ["[1]", "[2]"]
    assert row["full_token_ids"] is None


def test_rollout_of_a_mixed_rows_file(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        json.dumps(
            {
                "env_class_path": "agentsgym/GuessTheNumber-v0",
                "env_config": {"high": 4},
                "task_data": {"target": 2},
            }
        )
        + "\n"
        + json.dumps(
            {
                "env_class_path": "agentsgym/GuessTheNumber-v0",
                "env_config": {},
                "task_data": {"seed": 3},
            }
        )
        + "\n"
    )
    out = tmp_path / "r.parquet"
    result = run_cli(
        "rollout", "--dataset", str(rows), "--agent", "agentsgym/bisect", "--out", str(out)
    )
    assert result.code == 0, result.output
    loaded = datasets.Dataset.from_parquet(str(out))
    assert loaded["group_index"] == [0, 0, 1, 1] and set(loaded["final_reward"]) == {1.0}


def mixed_rows(tmp_path: Path, guesses: int = 9) -> Path:
    """More rows than --num-tasks' default (8): GuessTheNumber games and two arithmetic
    problems, whose envs have different default agents."""
    arithmetic = agentsgym.make("classical/Arithmetic-v0").get_eval_dataset()["task_data"][:2]
    rows = tmp_path / "mixed.jsonl"
    rows.write_text(
        "".join(
            json.dumps(
                {
                    "env_class_path": "agentsgym/GuessTheNumber-v0",
                    "env_config": {},
                    "task_data": {"seed": i},
                }
            )
            + "\n"
            for i in range(guesses)
        )
        + "".join(
            json.dumps(
                {"env_class_path": "classical/Arithmetic-v0", "env_config": {}, "task_data": task}
            )
            + "\n"
            for task in arithmetic
        )
    )
    return rows


def test_a_mixed_rows_file_plays_every_row_with_each_envs_default_agent(tmp_path: Path) -> None:
    rows, out = mixed_rows(tmp_path), tmp_path / "r.jsonl"
    result = run_cli("rollout", "--dataset", str(rows), "--num-rollouts", "1", "--out", str(out))
    assert result.code == 0, result.output
    written = datasets.Dataset.from_json(str(out))
    assert sorted(written["task_index"]) == list(range(11))  # every row, not the first 8
    assert set(written["final_reward"]) == {1.0}  # bisect and the arithmetic solver both win
    # the summary has one line per env
    assert "per env" in result.stdout
    assert re.search(r"agentsgym/GuessTheNumber-v0 +│ +9 │ +0 │ +1\.000", result.stdout)
    assert re.search(r"classical/Arithmetic-v0 +│ +2 │ +0 │ +1\.000", result.stdout)
    record = json.loads((tmp_path / "r.jsonl.run.json").read_text())["arguments"]
    assert record["env_agents"] == {
        "agentsgym/GuessTheNumber-v0": "agentsgym/bisect",
        "classical/Arithmetic-v0": "classical/arithmetic-solver",
    }
    first = run_cli(
        "rollout",
        "--dataset",
        str(rows),
        "--num-tasks",
        "3",
        "--num-rollouts",
        "1",
        "--out",
        str(tmp_path / "three.jsonl"),
    )
    assert first.code == 0, first.output
    assert datasets.Dataset.from_json(str(tmp_path / "three.jsonl")).num_rows == 3


def test_agents_per_env_and_their_options(tmp_path: Path) -> None:
    rows, out = mixed_rows(tmp_path, guesses=2), tmp_path / "r.jsonl"
    args = [
        "rollout",
        "--dataset",
        str(rows),
        "--num-rollouts",
        "1",
        "--agent",
        "classical/Arithmetic-v0=scripted",
        "--agent-option",
        'replies=["[7]"]',
    ]
    result = run_cli(*args, "--out", str(out))
    assert result.code == 0, result.output
    by_env: dict[str, list[str]] = {}
    for row in datasets.Dataset.from_json(str(out)):
        replies = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
        by_env.setdefault(row["env_id"], []).append(replies[0])
    # the scripted agent got the replies option; bisect (the other env's default) did not
    assert set(by_env["classical/Arithmetic-v0"]) == {"[7]"}
    assert set(by_env["agentsgym/GuessTheNumber-v0"]) == {"My guess is [50]."}
    # a resumed run must use the same agent for each env
    changed = run_cli(
        "rollout", "--dataset", str(rows), "--num-rollouts", "1", "--resume", "--out", str(out)
    )
    assert changed.code == 2 and "env_agents" in changed.stderr
    nobody = run_cli(*args[:-2], "--agent-option", "colour=red", "--out", str(tmp_path / "a.jsonl"))
    assert nobody.code == 2 and "no agent of this run takes the option 'colour'" in nobody.stderr
    assert "scripted: replies" in nobody.stderr
    stranger = run_cli(
        *args, "--agent", "classical/GSM8K-v0=scripted", "--out", str(tmp_path / "b.jsonl")
    )
    assert stranger.code == 2 and "which this run does not play" in stranger.output


def test_unknown_env_is_one_readable_error(tmp_path: Path) -> None:
    result = cli("rollout", "agentsgym/GuessNumber-v0", "--out", str(tmp_path / "x.parquet"))
    assert result.returncode == 2
    assert "Did you mean: agentsgym/GuessTheNumber-v0" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_output_suffix_fails_before_playing(tmp_path: Path) -> None:
    result = run_cli("rollout", "agentsgym/GuessTheNumber-v0", "--out", str(tmp_path / "x.csv"))
    assert result.code == 2 and ".parquet or .jsonl" in result.stderr


def test_check_env_command_passes_the_builtin_env() -> None:
    result = cli("check-env", "agentsgym/GuessTheNumber-v0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "passes check_env" in result.stdout


STALL_SECONDS = 6

STALLING_AGENT = f'''
import os
import time
from pathlib import Path

from agentsgym import hookimpl


class CountingUpAgent:
    """Guesses [1], [2], ... in turn; at guess 5 it stalls, like a hung model server."""

    def get_action(self, messages, agent_state):
        guess = sum(1 for m in messages if m["role"] == "user")
        if guess >= 5:
            Path(os.environ["STALL_MARKER"]).touch()
            time.sleep({STALL_SECONDS})
        return f"[{{guess}}]", agent_state


@hookimpl
def register_agents(register):
    register("stall/counting-up", "{{module}}:CountingUpAgent", description="stalls at guess 5")
'''


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_an_interrupted_run_keeps_the_trials_that_finished(
    tmp_path: Path, signal_name: str
) -> None:
    """Ctrl-C (or a scheduler's SIGTERM) stops the run with exit 130; the three trials
    that finished are in the output, the run record says it was interrupted."""
    import os
    import signal
    import time

    from agentsgym_scaffold import install_plugin
    from interruptible import python_taking_ctrl_c

    site = tmp_path / "site"
    install_plugin(site, "agentsgym-stall", "agentsgym_stall", STALLING_AGENT)
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        "".join(
            json.dumps(
                {
                    "env_class_path": "agentsgym/GuessTheNumber-v0",
                    "env_config": {"high": 10},
                    "task_data": {"target": t},
                }
            )
            + "\n"
            for t in (1, 2, 3, 7)
        )
    )
    marker, out = tmp_path / "stalled", tmp_path / "r.jsonl"
    env = {**os.environ, "PYTHONPATH": str(site), "STALL_MARKER": str(marker)}
    process = subprocess.Popen(
        [
            *python_taking_ctrl_c(),
            "-m",
            "agentsgym",
            "rollout",
            "--dataset",
            str(rows),
            "--agent",
            "stall/counting-up",
            "--num-rollouts",
            "1",
            "--max-concurrency",
            "1",
            "--out",
            str(out),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    assert marker.exists(), process.communicate()
    process.send_signal(getattr(signal, signal_name))
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted" in stdout and "3 of 4 trials" in stdout and "--resume" in stdout
    written = datasets.Dataset.from_json(str(out))
    assert sorted(t["target"] for t in written["task_data"]) == [1, 2, 3]
    assert set(written["final_reward"]) == {1.0}
    assert json.loads((tmp_path / "r.jsonl.run.json").read_text())["status"] == "interrupted"


# ---------------------------------------------------------------------- exit codes, timeouts
def failing_rows(tmp_path: Path, targets: list[int]) -> Path:
    """Rows of GuessTheNumber on [1, 100]; a target outside it fails its episode."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        "".join(
            json.dumps(
                {
                    "env_class_path": "agentsgym/GuessTheNumber-v0",
                    "env_config": {},
                    "task_data": {"target": t},
                }
            )
            + "\n"
            for t in targets
        )
    )
    return rows


def test_failures_are_counted_grouped_and_decide_the_exit_code(tmp_path: Path) -> None:
    from agentsgym.testing import run_cli

    rows = failing_rows(tmp_path, [5, 150, 170, 40, 60])
    args = ["rollout", "--dataset", str(rows), "--agent", "agentsgym/bisect", "--num-rollouts", "1"]
    result = run_cli(*args, "--out", str(tmp_path / "a.jsonl"))
    assert result.code == 0, result.output
    assert "2 of 5 trials failed" in result.stdout
    assert "2 x ValueError: task_data target 150 is outside [1, 100]" in result.stdout
    result = run_cli(*args, "--out", str(tmp_path / "b.jsonl"), "--max-failure-rate", "0.3")
    assert result.code == 1
    assert "run failed: 2 of 5 trials failed (40.0%), above --max-failure-rate 0.3" in result.stdout
    assert run_cli(*args, "--out", str(tmp_path / "c.jsonl"), "--max-failure-rate", "0.4").code == 0
    # the failed trials are in the output with their errors
    written = datasets.Dataset.from_json(str(tmp_path / "a.jsonl"))
    assert sum(e is not None for e in written["error"]) == 2


def test_a_run_where_every_trial_failed_exits_1(tmp_path: Path) -> None:
    from agentsgym.testing import run_cli

    rows = failing_rows(tmp_path, [150, 0])
    result = run_cli(
        "rollout",
        "--dataset",
        str(rows),
        "--agent",
        "scripted",
        "--num-rollouts",
        "1",
        "--out",
        str(tmp_path / "r.parquet"),
    )
    assert result.code == 1 and "every trial failed (2 of 2)" in result.stdout
    assert datasets.Dataset.from_parquet(str(tmp_path / "r.parquet")).num_rows == 2


@pytest.mark.parametrize(
    ("option", "budget"),
    [
        ("--hook-timeout", "hook_timeout_seconds=0.1"),
        ("--episode-timeout", "episode_timeout_seconds=0.1"),
    ],
)
def test_timeouts_from_the_command_line_reach_the_env(
    tmp_path: Path, option: str, budget: str
) -> None:
    """Every step of this env takes 1.5 s: a 0.1 s budget fails every episode, the run
    does not wait for the abandoned steps, and the budget is recorded with the run."""
    from agentsgym.testing import run_cli

    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        "".join(
            json.dumps({"env_class_path": "slow_envs:SlowStepGuessEnv", "task_data": {"target": t}})
            + "\n"
            for t in (3, 4)
        )
    )
    out = tmp_path / "r.jsonl"
    result = run_cli(
        "rollout",
        "--dataset",
        str(rows),
        "--allow-class-paths",
        "--agent",
        "agentsgym/bisect",
        "--num-rollouts",
        "1",
        option,
        "0.1",
        "--out",
        str(out),
    )
    assert result.code == 1, result.output
    assert "every trial failed (2 of 2)" in result.stdout and budget in result.stdout
    record = json.loads((tmp_path / "r.jsonl.run.json").read_text())
    assert record["arguments"]["env_config"][budget.split("=")[0]] == 0.1
    errors = [json.loads(line)["error"] for line in out.read_text().splitlines()]
    assert len(errors) == 2 and all(e.startswith("EpisodeTimeoutError") for e in errors)


def test_help_lists_commands_in_the_readme_order_and_80_columns_keep_ids_whole() -> None:
    from agentsgym.testing import run_cli

    shown = run_cli("--help", width=100).stdout
    order = ["rollout", "eval", "train", "list-envs", "describe", "check-env", "serve"]
    at = [shown.index(f"│ {name} ") for name in order]
    assert at == sorted(at), shown
    narrow = run_cli("list-envs", width=80).stdout
    assert max(len(line) for line in narrow.splitlines()) <= 80
    for whole in ("agentsgym/GuessTheNumber-v0", "GuessTheNumberEnv", "agentsgym-classical"):
        assert whole in narrow, narrow


def test_a_run_closes_the_envs_it_built(tmp_path: Path) -> None:
    from agentsgym.testing import register_env, run_cli
    from envs_for_tests import ClosingCountdownEnv

    ClosingCountdownEnv.closed = 0
    with register_env("test/Closing-v0", ClosingCountdownEnv):
        result = run_cli(
            "rollout",
            "test/Closing-v0",
            "--agent",
            "agentsgym/bisect",
            "--num-tasks",
            "1",
            "--out",
            str(tmp_path / "r.jsonl"),
        )
    assert result.code == 0, result.output
    assert ClosingCountdownEnv.closed == 1


KEYED_SOURCE_PLUGIN = """
from agentsgym import hookimpl, make


def build(url, *, tokenizer=None, env_config=None, plugins=()):
    return make("agentsgym/GuessTheNumber-v0", tokenizer=tokenizer, env_config=env_config,
                plugins=plugins)


@hookimpl
def register_env_sources(register):
    register("keyed+echo", "{module}:build", description="GuessTheNumber behind a URL")
"""

PLANTED_KEY = "sk-planted0123456789"


def test_a_key_in_an_env_url_never_reaches_the_terminal(site: Path, tmp_path: Path) -> None:
    from agentsgym_scaffold import install_plugin

    install_plugin(site, "agentsgym-keyed", "agentsgym_keyed", KEYED_SOURCE_PLUGIN)
    url = f"keyed+echo://user:{PLANTED_KEY}@host:9"
    out = str(tmp_path / "r.jsonl")
    played = run_cli(
        "rollout", url, "--agent", "agentsgym/bisect", "--num-tasks", "2", "--out", out
    )
    assert played.code == 0, played.output
    assert "rollouts of keyed+echo://<redacted>@host:9" in played.stdout
    checked = run_cli("check-env", url, "--agent", "agentsgym/bisect")
    failing = run_cli(
        "rollout", url.replace("keyed", "unknown"), "--out", str(tmp_path / "x.jsonl")
    )
    assert failing.code == 2 and "<redacted>" in failing.stderr
    for result in (played, checked, failing):
        assert PLANTED_KEY not in result.output, result.output
