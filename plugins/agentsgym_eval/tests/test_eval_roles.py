"""``agentsgym eval`` of an env with roles: a sample per role, each role's win, draw and
loss rates in the summary, --resume reading back a trial's rows per role."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from agentsgym.cli import build_app
from agentsgym_eval.samples import Sample, role_reports

runner = CliRunner()
GAME = [
    "classical/TicTacToe-v0",
    "--num-tasks",
    "3",
    "-k",
    "2",
    "--agent",
    "x=classical/tictactoe-heuristic",
    "--agent",
    "o=classical/tictactoe-random",
]


def test_role_reports_count_wins_draws_and_losses_by_hand() -> None:
    def sample(role: str | None, outcome: float | None, error: str | None = None) -> Sample:
        return Sample(
            task_index=0,
            rollout_index=0,
            task_data={},
            answer=None,
            correct=False,
            final_reward=outcome or 0.0,
            num_turns=1,
            error=error,
            role=role,
            outcome=outcome,
        )

    samples = [sample("x", 1.0), sample("x", 0.0), sample("x", -1.0), sample("x", 1.0, "boom")]
    report = role_reports([*samples, sample("o", None)])
    x = report["x"]
    assert (x.win_rate, x.draw_rate, x.loss_rate) == (0.25, 0.25, 0.5)  # a failure loses
    assert report["o"].win_rate is None  # an env that gives no outcome
    assert role_reports([sample(None, None)]) == {}


def test_eval_reports_each_role_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "games.jsonl"
    result = runner.invoke(build_app(), ["eval", *GAME, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "x: win / draw / loss" in result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 12 and {row["role"] for row in rows} == {"x", "o"}
    summary = json.loads(out.with_name("games.summary.json").read_text())
    x, o = summary["roles"]["x"], summary["roles"]["o"]
    assert x["num_samples"] == o["num_samples"] == 6
    assert x["win_rate"] == o["loss_rate"] and x["loss_rate"] == o["win_rate"]  # zero-sum
    out.write_text("".join(out.read_text().splitlines(keepends=True)[:7]))  # a torn trial
    resumed = runner.invoke(build_app(), ["eval", *GAME, "--out", str(out), "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(out.with_name("games.summary.json").read_text())["roles"] == summary["roles"]
