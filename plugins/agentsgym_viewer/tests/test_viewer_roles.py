"""``agentsgym view`` of a file of an env with roles: a role column in the list, and the
roles of one game side by side (each its own conversation and rewards) when printed,
paged, and on the HTML page."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from agentsgym.cli import build_app
from agentsgym_viewer import Pager, game_of, load_trajectories, write_html
from agentsgym_viewer.html import page_data

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


def test_the_pager_shows_a_game_a_page_with_each_roles_reward(games: Path) -> None:
    trajectories = load_trajectories(games)
    x, o = trajectories.episodes[0], trajectories.episodes[1]
    assert (x.final_reward, o.final_reward) != (0.0, 0.0)  # a game with a winner
    commands = iter(["n", "n", "1", "q"])
    out = io.StringIO()
    pager = Pager(
        trajectories.episodes,
        Console(file=out, width=220),
        read=lambda _: next(commands),
        clear=False,
        show_tokens=False,
    )
    pager.run()
    text = out.getvalue()
    assert "game 1 of 2 (#0 x, #1 o)" in text and "game 2 of 2 (#2 x, #3 o)" in text
    assert "this is the last game" in text
    assert [e.index for e in pager.shown] == [0, 1] and pager.current.index == 1  # "1": #1's game
    first_page = text[: text.index("game 1 of 2")]
    titles = next(line for line in first_page.splitlines() if "role x" in line)
    assert "role o" in titles  # the two roles' panels side by side
    rewards = next(line for line in first_page.splitlines() if "final reward" in line)
    assert f"{x.final_reward:+.4g}" in rewards and f"{o.final_reward:+.4g}" in rewards


def test_the_html_page_shows_a_game_in_a_column_per_role(games: Path, tmp_path: Path) -> None:
    page = tmp_path / "games.html"
    result = runner.invoke(build_app(), ["view", str(games), "--html", str(page)])
    assert result.exit_code == 0, result.output
    data = page_data(load_trajectories(games), load_trajectories(games).episodes, None)
    assert [e["game"] for e in data["episodes"]] == [[0, 1], [0, 1], [2, 3], [2, 3]]
    alone = runner.invoke(build_app(), ["view", str(games), "--html", str(page), "-e", "3"])
    assert "wrote 2 episodes" in alone.output  # --episode N: its game, as the terminal


@pytest.mark.timeout(120)
def test_the_page_draws_both_roles_side_by_side_in_a_browser(games: Path, tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    trajectories = load_trajectories(games)
    page_file = tmp_path / "games.html"
    write_html(trajectories, page_file)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        errors: list[str] = []
        page = browser.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(page_file.as_uri())
        page.click('#list .item[data-i="3"]')
        lanes = page.eval_on_selector_all(
            "#detail .game > .lane",
            "els => els.map(e => [e.dataset.i, e.classList.contains('current'), "
            "e.querySelector('h2').textContent, e.querySelector('.meta dd').textContent])",
        )
        browser.close()
    x, o = trajectories.episodes[2], trajectories.episodes[3]
    assert [(i, current) for i, current, _, _ in lanes] == [("2", False), ("3", True)]
    assert "role x" in lanes[0][2] and "role o" in lanes[1][2]
    assert [reward for *_, reward in lanes] == [
        f"+{x.final_reward:g}" if x.final_reward >= 0 else f"{x.final_reward:g}",
        f"+{o.final_reward:g}" if o.final_reward >= 0 else f"{o.final_reward:g}",
    ]
    assert errors == []


def test_paging_from_an_episode_the_filters_leave_out_shows_its_game(games: Path) -> None:
    args = ["view", str(games), "--episode", "1", "--failed", "--no-tokens", "--interactive"]
    result = runner.invoke(build_app(), args, input="q\n", env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "game 1 of 1 (#0 x, #1 o)" in result.output


def test_at_80_columns_each_panel_title_keeps_its_role(games: Path) -> None:
    result = runner.invoke(
        build_app(),
        ["view", str(games), "--episode", "1", "--no-interactive"],
        env={"COLUMNS": "80"},
    )
    assert result.exit_code == 0, result.output
    titles = next(line for line in result.output.splitlines() if "#0" in line and "#1" in line)
    assert "role x" in titles and "role o" in titles


def test_an_eval_of_a_game_shows_no_answer_a_move_never_gives(tmp_path: Path) -> None:
    out = tmp_path / "eval.jsonl"
    args = ["eval", "classical/TicTacToe-v0", "--num-tasks", "1", "-k", "1", "--out", str(out)]
    played = runner.invoke(build_app(), [*args, "--agent", "x=classical/tictactoe-heuristic"])
    assert played.exit_code == 0, played.output
    shown = view(str(out), "--episode", "0")
    assert "role x" in shown and "final reward" in shown
    assert "answer" not in shown
