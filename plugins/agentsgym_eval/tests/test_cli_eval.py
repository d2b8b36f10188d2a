"""``agentsgym eval``: metrics printed, per-sample results and a summary written."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest
from typer.testing import CliRunner

from agentsgym.cli import build_app
from agentsgym_eval import metrics

runner = CliRunner()


def run_eval(*args: str) -> str:
    result = runner.invoke(build_app(), ["eval", *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_eval_writes_samples_and_summary(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"results{suffix}"
    output = run_eval(
        "agentsgym/GuessTheNumber-v0", "--num-rollouts", "3", "--num-tasks", "4", "--out", str(out)
    )
    for label in ("accuracy", "pass@1", "pass@2", "pass@3", "best@3"):
        assert label in output
    assert "cons@" not in output  # GuessTheNumber reports no answer: nothing votes
    rows = (
        datasets.Dataset.from_parquet(str(out))
        if suffix == ".parquet"
        else datasets.Dataset.from_json(str(out))
    ).to_list()
    assert len(rows) == 12
    assert sorted((r["task_index"], r["rollout_index"]) for r in rows) == [
        (t, r) for t in range(4) for r in range(3)
    ]
    summary = json.loads((tmp_path / "results.summary.json").read_text())
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    assert "`results.summary.json` for `--out results.jsonl`" in readme  # as the docs say
    assert summary["env_id"] == "agentsgym/GuessTheNumber-v0" and summary["split"] == "eval"
    assert summary["cons_at_k"] is None
    assert summary["num_tasks"] == 4 and summary["num_rollouts"] == 3
    # bisection always finds the number within GuessTheNumber's 10 guesses
    assert summary["accuracy"] == 1.0 and summary["pass_at_k"]["3"] == 1.0


def test_eval_metrics_agree_with_the_samples_file(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    # Two guesses are too few for bisection on [1, 100]: some tasks fail, some succeed.
    run_eval(
        "agentsgym/GuessTheNumber-v0",
        "-k",
        "2",
        "--num-tasks",
        "12",
        "--env-config",
        "max_steps_per_episode=2",
        "--env-config",
        "high=4",
        "--out",
        str(out),
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    summary = json.loads((tmp_path / "r.summary.json").read_text())
    correct = [bool(r["correct"]) for r in rows]
    assert summary["accuracy"] == pytest.approx(metrics.accuracy(correct))
    by_task: dict[int, list[bool]] = {}
    for r in rows:
        by_task.setdefault(r["task_index"], []).append(bool(r["correct"]))
    expected = metrics.mean_pass_at_k([(2, sum(v)) for v in by_task.values()], 2)
    assert summary["pass_at_k"]["2"] == pytest.approx(expected)
    assert 0.0 < summary["accuracy"] < 1.0


def test_eval_rejects_a_bad_split(tmp_path: Path) -> None:
    result = runner.invoke(
        build_app(),
        [
            "eval",
            "agentsgym/GuessTheNumber-v0",
            "--split",
            "dev",
            "--out",
            str(tmp_path / "r.jsonl"),
        ],
    )
    assert result.exit_code != 0
