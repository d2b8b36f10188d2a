"""``agentsgym view`` of a file of an env with roles: a role column in the list, and the
roles of one game side by side (each its own conversation)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentsgym.cli import build_app
from agentsgym_viewer import game_of, load_trajectories

runner = CliRunner()


@pytest.fixture(scope="module")
def games(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("games") / "games.jsonl"
    args = ["rollout", "classical/TicTacToe-v0", "--num-tasks", "2", "--num-rollouts", "1"]
    args += [
        "--agent",
        "x=classical/tictactoe-heuristic",
        "--agent",
        "o=classical/tictactoe-random",
    ]
    result = runner.invoke(build_app(), [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def view(*args: str) -> str:
    result = runner.invoke(build_app(), ["view", *args, "--no-interactive"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def test_the_list_has_a_role_column(games: Path) -> None:
    lines = view(str(games), "--list").splitlines()
    header = next(line for line in lines if "reward" in line)
    assert "role" in header
    assert [line.split("│")[5].strip() for line in lines if line.startswith("│")] == [
        "x",
        "o",
        "x",
        "o",
    ]


def test_the_roles_of_a_game_are_shown_side_by_side(games: Path) -> None:
    trajectories = load_trajectories(games)
    x = trajectories.episodes[0]
    assert [e.role for e in game_of(x, trajectories.episodes)] == ["x", "o"]
    shown = view(str(games), "--episode", "1")
    titles = next(line for line in shown.splitlines() if "role x" in line)
    assert "role o" in titles  # both roles' panels open on one line
    beside = next(line for line in shown.splitlines() if "you play X" in line)
    assert "you play O" in beside  # each role's own first prompt, side by side
