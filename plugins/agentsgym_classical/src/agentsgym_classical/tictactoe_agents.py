"""Scripted TicTacToe players, opponents for eval and for training a model's seat:
random legal moves, and a simple heuristic (win, block, centre, corner, any)."""

from __future__ import annotations

import random
from typing import Any

from agentsgym import EpisodeContext
from agentsgym_classical.tictactoe_board import LINES, free_cells, read_board

PREFERENCE = (5, 1, 3, 7, 9, 2, 4, 6, 8)


def _my_mark(messages: list[dict[str, Any]]) -> str:
    first = next((m.get("content", "") for m in messages if m.get("role") == "user"), "")
    return "O" if "you play O" in first else "X"


def _board(messages: list[dict[str, Any]]) -> list[str]:
    for message in reversed(messages):
        if message.get("role") == "user":
            board = read_board(message.get("content", ""))
            if board is not None:
                return board
    raise ValueError("no TicTacToe board in the conversation; is this classical/TicTacToe-v0?")


def _rng(context: EpisodeContext | None, seed: int) -> random.Random:
    if context is None:
        return random.Random(seed)
    return random.Random(f"{seed}:{context.seed}:{context.step}")


class RandomMoveAgent:
    """A random legal move, seeded per rollout and step (``seed`` option)."""

    run_inline = True

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)

    def get_action(
        self, messages: list[dict[str, Any]], agent_state: Any, context: EpisodeContext | None
    ) -> tuple[str, Any]:
        move = _rng(context, self.seed).choice(free_cells(_board(messages)))
        return f"[{move}]", agent_state


class HeuristicAgent:
    """Win if it can, else block, else the centre, a corner, a side; ``randomness`` (0-1)
    is the chance of a random legal move instead, so that games vary (seeded)."""

    run_inline = True

    def __init__(self, randomness: float = 0.0, seed: int = 0) -> None:
        self.randomness = float(randomness)
        self.seed = int(seed)

    def get_action(
        self, messages: list[dict[str, Any]], agent_state: Any, context: EpisodeContext | None
    ) -> tuple[str, Any]:
        board = _board(messages)
        mine = _my_mark(messages)
        theirs = "X" if mine == "O" else "O"
        free = free_cells(board)
        rng = _rng(context, self.seed)
        if rng.random() < self.randomness:
            return f"[{rng.choice(free)}]", agent_state
        move = _completing(board, mine) or _completing(board, theirs)
        if move is None:
            move = next(cell for cell in PREFERENCE if cell in free)
        return f"[{move}]", agent_state


def _completing(board: list[str], mark: str) -> int | None:
    """A free cell that gives ``mark`` three in a line."""
    for line in LINES:
        marks = [board[i] for i in line]
        if marks.count(mark) == 2 and marks.count(" ") == 1:
            return line[marks.index(" ")] + 1
    return None
