"""classical/TicTacToe-v0: the board, the scripted players, the env contract with its
roles (check_env), and the zero-sum outcome of self-play and of a forfeit."""

from __future__ import annotations

import pytest

import agentsgym
from agentsgym import EpisodeContext, ScriptedAgent
from agentsgym.testing import check_env
from agentsgym_classical.tictactoe_agents import HeuristicAgent, RandomMoveAgent
from agentsgym_classical.tictactoe_board import draw_board, free_cells, read_board, winner


def board(text: str) -> list[str]:
    return [" " if c == "." else c for c in text]


def test_the_board_is_drawn_read_back_and_judged() -> None:
    cells = board("XO.X.O..X")
    assert read_board(f"Board:\n{draw_board(cells)}\nYour move.") == cells
    assert free_cells(cells) == [3, 5, 7, 8]
    assert winner(board("X..X..X..")) == "X" and winner(board("XOXOXOOXO")) is None


@pytest.mark.parametrize(
    ("cells", "mark", "move"),
    [("XX.OO....", "X", 3), ("XX.OO....", "O", 6), (".........", "X", 5), ("....X....", "O", 1)],
)
def test_the_heuristic_wins_then_blocks_then_takes_centre_and_corners(
    cells: str, mark: str, move: int
) -> None:
    messages = [{"role": "user", "content": f"you play {mark}\nBoard:\n{draw_board(board(cells))}"}]
    assert HeuristicAgent().get_action(messages, None, None)[0] == f"[{move}]"


def test_random_moves_are_legal_and_seeded() -> None:
    messages = [{"role": "user", "content": f"Board:\n{draw_board(board('XO.X.O..X'))}"}]
    context = EpisodeContext("s", "e", 0, 0, 0, seed=11, step=2)
    moves = {RandomMoveAgent(seed=1).get_action(messages, None, context)[0] for _ in range(3)}
    assert len(moves) == 1 and int(moves.pop()[1]) in (3, 5, 7, 8)


def test_tictactoe_passes_check_env_with_its_roles() -> None:
    report = check_env("classical/TicTacToe-v0", num_tasks=1, tokenizer=None)
    assert report.passed
    roles = next(c for c in report.checks if "own view" in c.name)
    assert roles.status == "ok" and "roles x, o" in roles.detail


def test_a_forfeit_loses_and_the_heuristic_never_loses_to_random() -> None:
    env = agentsgym.make("classical/TicTacToe-v0")
    forfeit = env.run_trial([{"seed": 0}], {"x": ScriptedAgent("no idea"), "o": HeuristicAgent()})
    x, o = forfeit.all_episodes
    assert (x.final_reward, o.metrics["outcome"], o.num_turns) == (-1.0, 1.0, 0)
    assert o.final_reward == 0.0  # o never acted: no token of its own carries the win
    games = env.run_trial(
        [{"seed": s} for s in range(4)], {"x": RandomMoveAgent(), "o": HeuristicAgent()}, 4
    )
    o_outcomes = [e.metrics["outcome"] for e in games.all_episodes if e.role == "o"]
    assert len(o_outcomes) == 16 and min(o_outcomes) >= 0.0


def test_without_strict_moves_a_reply_s_first_digit_is_its_move() -> None:
    lenient = agentsgym.make("classical/TicTacToe-v0", env_config={"strict_moves": False})
    strict = agentsgym.make("classical/TicTacToe-v0")
    players = {"x": ScriptedAgent("I take 5, then [1]"), "o": HeuristicAgent()}
    (x, _), (x_strict, _) = (
        env.run_trial([{"seed": 0}], players).all_episodes for env in (lenient, strict)
    )
    assert x.steps[0].info["move"] == 5 and x_strict.steps[0].info["move"] == 1
