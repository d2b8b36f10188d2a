"""``agentsgym eval`` of an env with roles: a sample per role, each role's scores (its own
answers voting in its cons@k) and win, draw and loss rates in the summary, --resume
reading back a trial's rows per role."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentsgym.cli import build_app
from agentsgym_eval import metrics
from agentsgym_eval.samples import Sample, role_reports, summarize

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
    # a move is no answer: nothing votes, so no cons@k; the pooled figures are not shown
    assert x["cons_at_k"] is None and summary["cons_at_k"] is None
    shown = [line.split("│")[1].strip() for line in result.output.splitlines() if "│" in line]
    assert "x: accuracy" in shown and "mean turns" in shown
    assert not [name for name in shown if "cons@" in name or name in ("accuracy", "mean reward")]
    out.write_text("".join(out.read_text().splitlines(keepends=True)[:7]))  # a torn trial
    resumed = runner.invoke(build_app(), ["eval", *GAME, "--out", str(out), "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(out.with_name("games.summary.json").read_text())["roles"] == summary["roles"]


def test_each_role_is_scored_on_its_own_answers() -> None:
    def sample(role: str, task: int, rollout: int, answer: str, correct: bool) -> Sample:
        return Sample(
            task_index=task,
            rollout_index=rollout,
            task_data={},
            answer=answer,
            correct=correct,
            final_reward=float(correct),
            num_turns=1,
            role=role,
            outcome=float(correct),
        )

    questioner = [
        sample("questioner", 0, 0, "cat", True),
        sample("questioner", 0, 1, "dog", False),
        sample("questioner", 0, 2, "cat", True),
    ]
    gamemaster = [
        sample("gamemaster", 0, 0, "No", False),
        sample("gamemaster", 0, 1, "No", False),
        sample("gamemaster", 0, 2, "Yes", True),
    ]
    report = summarize([*questioner, *gamemaster], env_id="duel")
    asked, answered = report.roles["questioner"], report.roles["gamemaster"]
    assert (asked.cons_at_k, asked.accuracy, asked.best_at_k) == (1.0, 2 / 3, 1.0)
    assert (answered.cons_at_k, answered.accuracy) == (0.0, 1 / 3)  # its "No"s outvote
    assert asked.pass_at_k == {1: pytest.approx(2 / 3), 2: 1.0, 3: 1.0}
    assert report.cons_at_k == 0.5  # the pooled figure: a (task, role) group each


def test_the_duel_scores_the_questioner_on_its_guesses(tmp_path: Path) -> None:
    out = tmp_path / "duel.jsonl"
    args = ["eval", "twentyq/TwentyQuestions-v0-duel", "--num-tasks", "2", "-k", "2"]
    result = runner.invoke(build_app(), [*args, "--out", str(out)])  # default agents
    assert result.exit_code == 0, result.output
    assert "questioner: cons@2" in result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    for row in rows:
        guesses = [i["guess"] for i in row["step_infos"] if i.get("kind") == "guess"]
        if row["role"] == "questioner":
            assert row["answer"] == guesses[-1].lower()
        else:
            assert row["answer"] in ("Yes", "No", "I don't know") and not guesses
    summary = json.loads(out.with_name("duel.summary.json").read_text())
    questioner = [r for r in rows if r["role"] == "questioner"]
    votes = {t: [r for r in questioner if r["task_index"] == t] for t in (0, 1)}
    expected = sum(
        metrics.cons_at_k([r["answer"] for r in g], [r["correct"] for r in g])
        for g in votes.values()
    ) / len(votes)
    assert summary["roles"]["questioner"]["cons_at_k"] == expected
