"""A minimal env server written only to AgentGym's protocol, as its env packages are.

It imports nothing of agentsgym: it stands for a third party's ``agentenv-*`` server
(a wrapper with ``_max_id`` under a lock, an id -> env dict, FastAPI routes
``/create``, ``/reset``, ``/step``, ``/observation``, ``/close``, errors answered as a
200 with an ``error`` field). Its game is a guess-the-number whose texts match
agentsgym's GuessTheNumber, task ``data_idx`` being the target of seed ``2 * data_idx``
(the train split of agentsgym/GuessTheNumber-v0), so that a client playing it can
be compared with the local env turn for turn.

``score=True`` reports the reward as a cumulative ``score`` field (as BabyAI's and
SciWorld's servers do) instead of ``reward``.
"""

from __future__ import annotations

import random
import re
import threading
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

LOW, HIGH, MAX_TURNS = 1, 100, 10
GUESS = re.compile(r"\[\s*(-?\d+)\s*\]")


class StepRequestBody(BaseModel):
    id: int
    action: str


class ResetRequestBody(BaseModel):
    id: int
    data_idx: int = 0


class CloseRequestBody(BaseModel):
    id: int


class GuessGame:
    def __init__(self) -> None:
        self.target = 0
        self.turn = 0
        self.score = 0.0
        self.observation = ""

    def reset(self, idx: int) -> str:
        self.target = random.Random(2 * idx).randint(LOW, HIGH)
        self.turn = 0
        self.score = 0.0
        self.observation = (
            f"I am thinking of an integer between {LOW} and {HIGH}. Find it in at most "
            f"{MAX_TURNS} guesses. Reply with your guess in square brackets, for example [50]."
        )
        return self.observation

    def step(self, action: str) -> tuple[str, float, bool]:
        self.turn += 1
        left = MAX_TURNS - self.turn
        match = GUESS.search(action)
        if match is None:
            self.observation = (
                f"I could not find a guess like [50] in your reply. Guesses left: {left}."
            )
            return self.observation, 0.0, False
        guess = int(match.group(1))
        if guess == self.target:
            self.observation = "Correct!"
            self.score += 1.0
            return self.observation, 1.0, True
        direction = "higher" if guess < self.target else "lower"
        self.observation = f"{guess} is wrong; the number is {direction}. Guesses left: {left}."
        return self.observation, 0.0, False


class GuessWrapper:
    def __init__(self, score: bool) -> None:
        self._max_id = 0
        self._lock = threading.Lock()
        self.env: dict[int, GuessGame] = {}
        self.locks: dict[int, threading.Lock] = {}
        self.score = score
        self.steps = 0
        self.closed: list[int] = []

    def create(self) -> dict[str, Any]:
        with self._lock:
            env_id = self._max_id
            self._max_id += 1
        self.env[env_id] = GuessGame()
        self.locks[env_id] = threading.Lock()
        return {"id": env_id}

    def _payload(self, game: GuessGame, reward: float, done: bool) -> dict[str, Any]:
        if self.score:
            return {"observation": game.observation, "score": game.score, "done": done}
        return {"observation": game.observation, "reward": reward, "done": done}

    def reset(self, env_id: int, data_idx: int) -> dict[str, Any]:
        if env_id not in self.env:
            return {"error": f"Env {env_id} not exist"}
        with self.locks[env_id]:
            game = self.env[env_id]
            game.reset(data_idx)
            return self._payload(game, 0.0, False)

    def step(self, env_id: int, action: str) -> dict[str, Any]:
        if env_id not in self.env:
            return {"error": f"Env {env_id} not exist"}
        with self.locks[env_id]:
            game = self.env[env_id]
            _, reward, done = game.step(action)
            self.steps += 1
            return self._payload(game, reward, done)

    def observe(self, env_id: int) -> dict[str, Any]:
        if env_id not in self.env:
            return {"error": "Env info not initialized"}
        return {"observation": self.env[env_id].observation}

    def close(self, env_id: int) -> dict[str, Any]:
        if self.env.pop(env_id, None) is None:
            return {"closed": False, "error": "Env not exist"}
        self.closed.append(env_id)
        return {"closed": True}


def build_app(score: bool = False) -> FastAPI:
    app = FastAPI()
    server = GuessWrapper(score)
    app.state.wrapper = server

    @app.get("/")
    def hello() -> str:
        return "This is environment Guess."

    @app.post("/create")
    def create() -> dict[str, Any]:
        return server.create()

    @app.post("/step")
    def step(body: StepRequestBody) -> dict[str, Any]:
        return server.step(body.id, body.action)

    @app.post("/reset")
    def reset(body: ResetRequestBody) -> dict[str, Any]:
        return server.reset(body.id, body.data_idx)

    @app.get("/observation")
    def get_observation(id: int) -> dict[str, Any]:
        return server.observe(id)

    @app.post("/close")
    def close(body: CloseRequestBody) -> dict[str, Any]:
        return server.close(body.id)

    return app
