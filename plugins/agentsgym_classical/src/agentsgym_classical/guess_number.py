"""GuessTheNumber, the small example env (``agentsgym/GuessTheNumber-v0``): find a hidden integer
in ``[low, high]`` from "higher"/"lower" hints, guessing with an integer in square
brackets (``[50]``). Reward 1.0 for finding it, 0.0 otherwise.

A guess is the first ``[N]`` of a reply: the bracket is the format the task asks for
(a bare number is not a guess). Served over AgentGym's protocol, whose BabyAI and
TextCraft clients strip the brackets (``[50]`` reaches the server as ``50``), an action
of letters, digits, commas and spaces is put back into ``[...]``
(``agentgym_action_format``, read by agentsgym-serve only). A
reply cut at the agent's length limit without a bracketed guess holds no guess, and
the feedback says it was cut off."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import Field, model_validator

from agentsgym import (
    MAX_STEPS_PER_EPISODE,
    AgentAction,
    EnvConfig,
    MultistepEnv,
    StepResult,
    hookimpl,
)

GUESS = re.compile(r"\[\s*(-?\d+)\s*\]")
NO_GUESS = "I could not find a guess like [50] in your reply."
CUT_OFF = (
    "Your reply was cut off at the length limit before a guess like [50]. "
    "Reply with just your guess."
)
MAX_BOUND = 10**12  # bounds of the hidden number's range: bisection needs at most 41 guesses


class GuessTheNumberConfig(EnvConfig):
    max_steps_per_episode: int = Field(default=10, ge=1, le=MAX_STEPS_PER_EPISODE)
    low: int = Field(1, ge=-MAX_BOUND, le=MAX_BOUND, description="smallest possible number")
    high: int = Field(100, ge=-MAX_BOUND, le=MAX_BOUND, description="largest possible number")

    @model_validator(mode="after")
    def _range_not_empty(self) -> GuessTheNumberConfig:
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) must not exceed high ({self.high})")
        return self


@dataclass
class GuessState:
    target: int
    guesses: list[int] = field(default_factory=list)
    feedback: str = ""


class GuessTheNumberEnv(MultistepEnv):
    """Find a hidden integer with higher/lower hints."""

    config_class = GuessTheNumberConfig
    config: GuessTheNumberConfig
    # Its hooks compare two integers: a worker-thread hop would cost more than the turn.
    # A subclass whose hooks wait (I/O, sleeps, a slow grader) sets it back to False.
    run_hooks_inline = True
    # agentsgym serve, AgentGym's protocol only: a sanitised "50" is stepped as "[50]"
    agentgym_action_format = "[{action}]"

    @hookimpl
    def initialize_episode(self, session_id: str, task_data: dict[str, Any]) -> GuessState:
        low, high = self.config.low, self.config.high
        if "target" in task_data:
            target = int(task_data["target"])
            if not low <= target <= high:
                raise ValueError(f"task_data target {target} is outside [{low}, {high}]")
        else:
            target = random.Random(task_data.get("seed")).randint(low, high)
        return GuessState(target=target)

    @hookimpl
    def format_prompt(self, state: GuessState, step: int) -> str:
        left = self.config.max_steps_per_episode - step
        if step == 0:
            return (
                f"I am thinking of an integer between {self.config.low} and "
                f"{self.config.high}. Find it in at most {left} guesses. Reply with your "
                "guess in square brackets, for example [50]."
            )
        return f"{state.feedback} Guesses left: {left}."

    @hookimpl
    def step_episode(self, state: GuessState, action: str) -> StepResult:
        match = GUESS.search(action)
        if match is None:
            return StepResult(replace(state, feedback=NO_GUESS), 0.0, False, {"valid": False})
        guess = int(match.group(1))
        correct = guess == state.target
        if correct:
            feedback = "Correct!"
        else:
            direction = "higher" if guess < state.target else "lower"
            feedback = f"{guess} is wrong; the number is {direction}."
        info = {"valid": True, "guess": guess, "correct": correct}
        next_state = GuessState(state.target, [*state.guesses, guess], feedback)
        return StepResult(next_state, float(correct), correct, info)

    @hookimpl(specname="step_episode", tryfirst=True)
    def step_cut_off_reply(
        self, state: GuessState, action: str, reply: AgentAction
    ) -> StepResult | None:
        """A reply cut at the length limit without a bracketed guess holds no guess (its
        last number is a fragment); any other reply goes on to :meth:`step_episode`."""
        if not reply.truncated or GUESS.search(action):
            return None
        info = {"valid": False, "cut_off": True}
        return StepResult(replace(state, feedback=CUT_OFF), 0.0, False, info)

    # Seeds are disjoint between splits: train uses even seeds, eval odd ones.
    def get_train_dataset(self, size: int = 200) -> Any:
        return self.make_dataset([{"seed": 2 * i} for i in range(size)])

    def get_eval_dataset(self, size: int = 50) -> Any:
        return self.make_dataset([{"seed": 2 * i + 1} for i in range(size)])


class BisectAgent:
    """Plays GuessTheNumber by bisection, reading the hints from the conversation."""

    run_inline = True  # instant: the runner calls it on its loop, no thread hop

    def __init__(self, low: int = 1, high: int = 100) -> None:
        self.low, self.high = low, high

    def get_action(self, messages: list[dict[str, str]], agent_state: Any) -> tuple[str, Any]:
        low, high = self.low, self.high
        first = next((m["content"] for m in messages if m.get("role") == "user"), "")
        bounds = re.search(r"between (-?\d+) and (-?\d+)", first)
        if bounds:
            low, high = int(bounds.group(1)), int(bounds.group(2))
        for message in messages:
            hint = re.search(
                r"(-?\d+) is wrong; the number is (higher|lower)", message.get("content", "")
            )
            if message.get("role") == "user" and hint:
                guess = int(hint.group(1))
                if hint.group(2) == "higher":
                    low = max(low, guess + 1)
                else:
                    high = min(high, guess - 1)
        return f"My guess is [{(low + high) // 2}].", agent_state
