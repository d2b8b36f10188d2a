"""TicTacToe for two agents (``classical/TicTacToe-v0``): the env, its config and its
state. How it plays is the env class's docstring, which ``agentsgym describe`` shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from agentsgym import EnvConfig, MultistepEnv, Role, StepResult, hookimpl
from agentsgym_classical.tictactoe_board import (
    draw_board,
    free_cells,
    new_board,
    read_move,
    winner,
)

MARKS = {"x": "X", "o": "O"}
RULES = (
    "We play tic-tac-toe on a 3x3 board; you play {mark}, your opponent plays {other}. "
    "Three marks in a row, column or diagonal win. A free cell shows its number. "
    "Reply with the number of a free cell in square brackets, for example [5]; a reply "
    "without a legal move loses the game."
)


class TicTacToeConfig(EnvConfig):
    max_steps_per_episode: int = Field(default=9, ge=1, le=9)
    strict_moves: bool = Field(
        default=True,
        description="a move is [N]; false: the first digit 1-9 of a reply is its move "
        "(a small model that cannot keep the format still plays, and can learn to)",
    )


@dataclass
class TicTacToeState:
    board: list[str] = field(default_factory=new_board)
    to_move: str = "x"
    last_move: dict[str, int] = field(default_factory=dict)
    prompted: set[str] = field(default_factory=set)
    forfeit: str | None = None


class TicTacToeEnv(MultistepEnv):
    """Tic-tac-toe for two agents: ``x`` moves first, ``o`` second, each in its own
    conversation (the rules, the board and the other's last move). A move is a free
    cell's number in square brackets (``[5]``; with ``strict_moves=false``, the first
    digit 1-9 of a reply); a reply without a legal move forfeits the game. The outcome
    is zero-sum: +1 for the winner, -1 for the loser, 0 each for a draw, in each role's
    ``metrics["outcome"]`` (``role_rewards``).

    ``o`` plays ``classical/tictactoe-random`` unless an agent is named for it (its
    ``Role.default_agent``): ``--agent x=MODEL`` plays MODEL against random moves,
    ``--agent o=classical/tictactoe-heuristic`` against the heuristic, and ``--agent
    MODEL`` plays MODEL in both roles (self-play)."""

    config_class = TicTacToeConfig
    config: TicTacToeConfig
    roles = (
        Role("x", description="plays X and moves first"),
        Role("o", description="plays O", default_agent="classical/tictactoe-random"),
    )
    run_hooks_inline = True  # a board of nine cells: a thread hop would cost more

    @hookimpl
    def initialize_episode(self, session_id: str, task_data: dict[str, Any]) -> TicTacToeState:
        return TicTacToeState()

    @hookimpl
    def turn_role(self, state: TicTacToeState) -> str:
        return state.to_move

    @hookimpl
    def format_prompt(self, state: TicTacToeState, role: str) -> str:
        board = f"Board:\n{draw_board(state.board)}\nYour move."
        other = "o" if role == "x" else "x"
        parts = []
        if role not in state.prompted:
            state.prompted.add(role)
            parts.append(RULES.format(mark=MARKS[role], other=MARKS[other]))
        if other in state.last_move:
            parts.append(f"{MARKS[other]} played [{state.last_move[other]}].")
        return "\n".join([*parts, board])

    @hookimpl
    def step_episode(self, state: TicTacToeState, action: str, role: str) -> StepResult:
        move = read_move(action, strict=self.config.strict_moves)
        if move is None or move not in free_cells(state.board):
            state.forfeit = role
            return StepResult(state, 0.0, True, {"move": move, "legal": False})
        state.board[move - 1] = MARKS[role]
        state.last_move[role] = move
        state.to_move = "o" if role == "x" else "x"
        done = winner(state.board) is not None or not free_cells(state.board)
        return StepResult(state, 0.0, done, {"move": move, "legal": True})

    @hookimpl
    def role_rewards(self, state: TicTacToeState) -> dict[str, float]:
        if state.forfeit is not None:
            other = "o" if state.forfeit == "x" else "x"
            return {state.forfeit: -1.0, other: 1.0}
        mark = winner(state.board)
        if mark is None:
            return {"x": 0.0, "o": 0.0}
        won = "x" if mark == "X" else "o"
        return {won: 1.0, ("o" if won == "x" else "x"): -1.0}

    # A deterministic game: the seeds only tell tasks (and the agents' rollouts) apart.
    def get_train_dataset(self, size: int = 64) -> Any:
        return self.make_dataset([{"seed": 2 * i} for i in range(size)])

    def get_eval_dataset(self, size: int = 32) -> Any:
        return self.make_dataset([{"seed": 2 * i + 1} for i in range(size)])
