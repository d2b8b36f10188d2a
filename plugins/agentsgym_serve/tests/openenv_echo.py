"""An env server built only with openenv-core (no agentsgym code): openenv's template
env ("echo", from ``openenv init``) with a step limit, served by openenv's ``create_app``."""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

MAX_STEPS = 3


class EchoAction(Action):
    message: str = Field(..., description="Message to echo back")


class EchoObservation(Observation):
    echoed_message: str = Field(default="", description="The echoed message")
    message_length: int = Field(default=0, description="Length of the echoed message")


class EchoEnvironment(Environment):
    """The template's echo env: reward 0.1 per character; done after MAX_STEPS steps."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State(episode_id="none", step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **_: Any) -> Any:
        self._state = State(episode_id=episode_id or f"seed-{seed}", step_count=0)
        return EchoObservation(echoed_message=f"Echo environment ready! (seed {seed})", reward=0.0)

    def step(self, action: EchoAction, timeout_s: float | None = None, **_: Any) -> Any:  # type: ignore[override]
        self._state.step_count += 1
        return EchoObservation(
            echoed_message=action.message,
            message_length=len(action.message),
            done=self._state.step_count >= MAX_STEPS,
            reward=len(action.message) * 0.1,
            metadata={"step": self._state.step_count},
        )

    @property
    def state(self) -> State:
        return self._state


def echo_app(max_concurrent_envs: int = 64) -> Any:
    return create_app(
        EchoEnvironment,
        EchoAction,
        EchoObservation,
        env_name="echo",
        max_concurrent_envs=max_concurrent_envs,
    )
