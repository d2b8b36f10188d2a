"""Calculator, the example tool env (``tools/Calculator-v0``): answer ``a * b + c`` with
the ``multiply`` and ``add`` tools, then give the result as ``\\boxed{N}``.

Tasks may narrow the tools (``task_data["tools"]``: a subset of their names), which is
how tools differ per episode. Reward 1.0 for the right boxed answer, 0.0 otherwise.
"""

from __future__ import annotations

import random
import re
from typing import Any

from agentsgym import Messages, StepResult, hookimpl
from agentsgym_tools.agent import ScriptedToolAgent, Turn
from agentsgym_tools.env import ToolEnv, ToolLike

__all__ = ["CalculatorEnv", "add", "calculator_solver", "multiply"]

BOXED = re.compile(r"\\boxed\{\s*(-?\d+)\s*\}")
QUESTION = re.compile(r"What is (-?\d+) \* (-?\d+) \+ (-?\d+)\?")


def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: the first factor
        b: the second factor
    """
    return a * b


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first term
        b: the second term
    """
    return a + b


class CalculatorEnv(ToolEnv):
    """The example tool env: each task asks for a * b + c with three numbers of its own.
    The model calls the multiply and add tools (as often as it likes, within
    max_steps_per_episode), then answers with the result as \\boxed{N}: reward 1.0 when
    N is right, 0.0 otherwise. A task may narrow the tools (task_data["tools"], a list of
    their names), which is how tools differ per episode; the a, b and c of a task come
    from its seed, or from task_data itself."""

    tools = (multiply, add)
    run_hooks_inline = True  # the hooks compute for microseconds; tools run in threads

    def get_tools(self, task_data: dict[str, Any]) -> list[ToolLike]:
        wanted = task_data.get("tools")
        tools = list(self._default_tools)
        return tools if wanted is None else [t for t in tools if t.name in set(wanted)]

    @hookimpl
    def initialize_episode(self, session_id: str, task_data: dict[str, Any]) -> dict[str, int]:
        rng = random.Random(int(task_data.get("seed", 0)))
        a, b, c = (int(task_data[k]) if k in task_data else rng.randint(10, 999) for k in "abc")
        return {"a": a, "b": b, "c": c}

    @hookimpl
    def format_prompt(self, state: dict[str, int], step: int) -> str:
        if step == 0:
            return (
                f"What is {state['a']} * {state['b']} + {state['c']}? Use the tools, then "
                "give the result as \\boxed{N}."
            )
        return "Give the result as \\boxed{N}."

    @hookimpl
    def step_episode(self, state: dict[str, int], action: str) -> StepResult:
        found = BOXED.findall(action)
        expected = state["a"] * state["b"] + state["c"]
        correct = bool(found) and int(found[-1]) == expected
        info = {"answer": found[-1] if found else None, "correct": correct}
        return StepResult(state, 1.0 if correct else 0.0, bool(found), info)

    def get_train_dataset(self, size: int = 64) -> Any:
        return self.make_dataset({"seed": seed} for seed in range(size))

    def get_eval_dataset(self, size: int = 32) -> Any:
        return self.make_dataset({"seed": 10**6 + seed} for seed in range(size))


def _solve(messages: Messages) -> Turn:
    """multiply, then add, then the boxed answer: read off the conversation."""
    question = next(
        QUESTION.search(m["content"]) for m in messages if QUESTION.search(m.get("content", ""))
    )
    a, b, c = (int(x) for x in question.groups())
    results = [m["content"] for m in messages if m.get("role") == "tool"]
    if not results:
        return [("multiply", {"a": a, "b": b})]
    if len(results) == 1 and results[0].lstrip("-").isdigit():
        return [("add", {"a": int(results[0]), "b": c})]
    return f"The result is \\boxed{{{results[-1]}}}."  # or the error it got


def calculator_solver(tokenizer: Any = None, token_out: bool = False) -> ScriptedToolAgent:
    """A scripted agent that solves Calculator tasks with its tools (the env's default):
    calls structured, as a chat server returns them, or written as ``tokenizer``'s
    template writes them (``token_out``: with their token ids)."""
    return ScriptedToolAgent(_solve, tokenizer, token_out=token_out)
