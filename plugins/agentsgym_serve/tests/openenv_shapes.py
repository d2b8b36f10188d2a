"""An env server built only with openenv-core whose observations and actions are not
chat-shaped (issue 27): TextArena-style ``messages`` ({sender_id, content, category}),
a nested ``board`` whose ``log`` grows by a line each step, and an MCP-style action
(``tool_name`` and a dict of ``arguments``). Reward: the ``n`` argument; done after
``STEPS`` steps."""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

STEPS = 2
GAME = -1
"""TextArena's sender id of the game itself."""


class ToolAction(Action):
    tool_name: str = Field(..., description="the tool to call")
    arguments: dict[str, Any] = Field(default_factory=dict, description="its arguments")


class BoardObservation(Observation):
    messages: list[dict[str, Any]] = Field(default_factory=list)
    board: dict[str, Any] = Field(default_factory=dict)


class ToolBoard(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State(episode_id="none", step_count=0)
        self._log = ""

    def reset(self, seed: int | None = None, episode_id: str | None = None, **_: Any) -> Any:
        self._state = State(episode_id=episode_id or f"seed-{seed}", step_count=0)
        self._log = f"board {seed} opened"
        return self._observe(f"Welcome to board {seed}", reward=0.0)

    def step(self, action: ToolAction, timeout_s: float | None = None, **_: Any) -> Any:  # type: ignore[override]
        self._state.step_count += 1
        self._log += f"\n{action.tool_name}({action.arguments.get('n')})"
        return self._observe(
            f"You called {action.tool_name}",
            reward=float(action.arguments.get("n", 0)),
            done=self._state.step_count >= STEPS,
        )

    def _observe(self, text: str, *, reward: float, done: bool = False) -> BoardObservation:
        return BoardObservation(
            messages=[{"sender_id": GAME, "content": text, "category": "GAME"}],
            board={"log": self._log, "turn": self._state.step_count},
            reward=reward,
            done=done,
        )

    @property
    def state(self) -> State:
        return self._state


def board_app() -> Any:
    return create_app(ToolBoard, ToolAction, BoardObservation, env_name="board")
