"""Envs the env server tests serve by class path (``serve_envs:TermsEnv``)."""

from __future__ import annotations

import threading
import time
from typing import Any, ClassVar

from agentsgym import MultistepEnv, RewardTerm, Role, StepResult, hookimpl
from agentsgym_classical import GuessState, GuessTheNumberConfig, GuessTheNumberEnv
from agentsgym_tools import ToolContext, ToolEnv


class TermsEnv(GuessTheNumberEnv):
    """GuessTheNumber with every hook result the remote path must carry: a system
    message, reward_shaping terms (two implementations of one name), a finish term,
    an info with a tuple and a nested dict, and non-ASCII text."""

    finished: ClassVar[list[tuple[str, bool, str | None]]] = []

    @hookimpl
    def format_prompt(self, state: GuessState, step: int) -> Any:
        text = super().format_prompt(state, step)
        if step == 0:
            return [
                {"role": "system", "content": "Tu es un joueur prudent. 🎯"},
                {"role": "user", "content": text},
            ]
        return text

    @hookimpl
    def step_episode(self, state: GuessState, action: str) -> StepResult:
        result = super().step_episode(state, action)
        info = {**result.info, "pair": (1, 2), "nested": {"x": [1.5, None]}}
        return StepResult(result.state, result.reward, result.done, info)

    @hookimpl
    def reward_shaping(self, action: str, step: int) -> list[RewardTerm]:
        return [RewardTerm("brevity", -0.01 * len(action)), RewardTerm("step", 0.1 * step)]

    @hookimpl
    def finish_episode(
        self, state: Any, truncated: bool, error: str | None, session_id: str
    ) -> Any:
        TermsEnv.finished.append((session_id, truncated, error))
        if state is None or error is not None:
            return None
        return RewardTerm("guesses", -0.05 * len(state.guesses))


class StepShaping:
    """A second reward_shaping implementation with a name TermsEnv also uses."""

    @hookimpl
    def reward_shaping(self) -> RewardTerm:
        return RewardTerm("step", 0.25)


class TrackingEnv(GuessTheNumberEnv):
    """GuessTheNumber whose steps take a moment and count how many run at once."""

    run_hooks_inline = False  # its hooks wait: worker threads, as for any such env

    lock = threading.Lock()
    in_flight = 0
    max_in_flight = 0

    @hookimpl
    def step_episode(self, state: GuessState, action: str) -> StepResult:
        with TrackingEnv.lock:
            TrackingEnv.in_flight += 1
            TrackingEnv.max_in_flight = max(TrackingEnv.max_in_flight, TrackingEnv.in_flight)
        try:
            time.sleep(0.02)
            return super().step_episode(state, action)
        finally:
            with TrackingEnv.lock:
                TrackingEnv.in_flight -= 1


class JudgedConfig(GuessTheNumberConfig):
    judge_api_key: str = ""
    judge_url: str = ""


class SecretEnv(GuessTheNumberEnv):
    """GuessTheNumber whose config holds secrets and keeps them in its rows (as an env
    should not: the server must not hand them out anyway)."""

    config_class = JudgedConfig


class ExplodingEnv(GuessTheNumberEnv):
    """GuessTheNumber whose step_episode raises on a reply that says ``boom``."""

    @hookimpl
    def step_episode(self, state: GuessState, action: str) -> StepResult:
        if "boom" in action:
            raise RuntimeError("the env exploded")
        return super().step_episode(state, action)


class Duet(MultistepEnv):
    """Two roles that take turns (``task_data["turns"]`` in all, default 2), neither
    with a default agent: a server of it needs ``--agent`` for a role its clients do
    not play."""

    roles = (Role("a"), Role("b"))
    run_hooks_inline = True

    @hookimpl
    def initialize_episode(self, task_data: dict[str, Any]) -> dict[str, Any]:
        return {"turns": 0, "last": task_data.get("turns", 2)}

    @hookimpl
    def turn_role(self, state: dict[str, Any]) -> str:
        return "a" if state["turns"] % 2 == 0 else "b"

    @hookimpl
    def format_prompt(self, state: dict[str, Any], role: str) -> str:
        return f"{role}: your line"

    @hookimpl
    def step_episode(self, state: dict[str, Any], action: str) -> StepResult:
        state["turns"] += 1
        return StepResult(state, 0.0, state["turns"] == state["last"], {})


def whoami(context: ToolContext) -> str:
    """Say which episode this call belongs to."""
    return f"{context.session_id}|{context.task_data['secret']}|{context.state['secret']}"


def peek(context: ToolContext) -> str:
    """Say which task this episode plays (a tool only some tasks have)."""
    return str(context.task_data["secret"])


class WhoEnv(ToolEnv):
    """A tool env whose tools say whose episode they serve: ``whoami`` names the episode's
    session, task and state; a task's ``tools`` narrow the tools (``peek`` only for some).
    ``initialize_episode`` waits (up to a few seconds) until two episodes are starting at
    once, so that their tools are made before either episode's state is known: the
    moment two sessions of one task could swap contexts."""

    tools = (whoami, peek)
    starting: ClassVar[threading.Barrier] = threading.Barrier(2)

    def get_tools(self, task_data: dict[str, Any]) -> list[Any]:
        wanted = task_data.get("tools")
        return [t for t in self._default_tools if wanted is None or t.name in wanted]

    @hookimpl
    def initialize_episode(self, session_id: str, task_data: dict[str, Any]) -> dict[str, Any]:
        try:
            self.starting.wait(timeout=5)
        except threading.BrokenBarrierError:  # a lone episode: nothing to wait for
            self.starting.reset()
        return {"secret": task_data["secret"]}

    @hookimpl
    def format_prompt(self, state: dict[str, Any], step: int) -> str:
        return "Who are you?"

    @hookimpl
    def step_episode(self, state: dict[str, Any], action: str) -> StepResult:
        return StepResult(state, 1.0, True, {})

    def get_train_dataset(self, size: int = 1) -> Any:
        return [{"task_data": {"secret": "shared"}}]
