"""Countdown, the viewer tests' second env: a system prompt, a reward per right number,
and an exception on "boom" (an episode that fails after a rewarded step)."""

from __future__ import annotations

from typing import Any

from agentsgym import MultistepEnv, StepResult, hookimpl


class Countdown(MultistepEnv):
    """Say the numbers from task_data['start'] down to 1."""

    @hookimpl
    def initialize_episode(self, session_id: str, task_data: dict[str, Any]) -> int:
        return int(task_data["start"])

    @hookimpl
    def format_prompt(self, state: int, step: int) -> Any:
        if step == 0:
            return [
                {"role": "system", "content": "Count down."},
                {"role": "user", "content": f"Say {state}."},
            ]
        return f"Now say {state}."

    @hookimpl
    def step_episode(self, state: int, action: str) -> StepResult:
        if "boom" in action:
            raise RuntimeError("the env exploded")
        if action.split()[-1:] != [str(state)]:
            return StepResult(state, 0.0, False, {"right": False})
        return StepResult(state - 1, 0.5 + (state == 1), state == 1, {"right": True})


class CountingAgent:
    """Counts down correctly, reading the number from the last message."""

    run_inline = True

    def get_action(self, messages: list[dict[str, str]], agent_state: Any) -> tuple[str, Any]:
        return messages[-1]["content"].split()[-1].rstrip("."), agent_state
