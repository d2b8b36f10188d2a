"""The TicTacToe board: cells 1-9, marks X and O, who won; and how it is drawn in a
prompt and read back by the scripted players (``agentsgym_classical.tictactoe_agents``)."""

from __future__ import annotations

import re

LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
MOVE = re.compile(r"\[\s*([1-9])\s*\]")
DIGIT = re.compile(r"([1-9])")
BOARD_ROW = re.compile(r"^ ([XO1-9]) \| ([XO1-9]) \| ([XO1-9])$", re.MULTILINE)
EMPTY = " "


def new_board() -> list[str]:
    return [EMPTY] * 9


def winner(board: list[str]) -> str | None:
    """``"X"`` or ``"O"`` when one has three in a line, else ``None``."""
    for a, b, c in LINES:
        if board[a] != EMPTY and board[a] == board[b] == board[c]:
            return board[a]
    return None


def free_cells(board: list[str]) -> list[int]:
    """The free cells, numbered 1-9."""
    return [i + 1 for i, mark in enumerate(board) if mark == EMPTY]


def draw_board(board: list[str]) -> str:
    """Three rows ``" X | 2 | O"``: a free cell shows its number."""
    cells = [mark if mark != EMPTY else str(i + 1) for i, mark in enumerate(board)]
    return "\n".join(" " + " | ".join(cells[row : row + 3]) for row in (0, 3, 6))


def read_board(text: str) -> list[str] | None:
    """The last board drawn in ``text`` (``None`` if it holds none)."""
    rows = BOARD_ROW.findall(text)
    if len(rows) < 3:
        return None
    cells = [cell for row in rows[-3:] for cell in row]
    return [cell if cell in "XO" else EMPTY for cell in cells]


def read_move(text: str, *, strict: bool = True) -> int | None:
    """The first ``[N]`` of a reply, N in 1-9 (not ``strict``: its first digit 1-9)."""
    match = MOVE.search(text) if strict else DIGIT.search(text)
    return int(match.group(1)) if match else None
