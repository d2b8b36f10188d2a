"""The scripted baseline: solves the embedded arithmetic problems in any classical format.

It reads the problem from the conversation, solves it exactly with
:func:`agentsgym_classical.arithmetic.solve_text`, and answers in the form the
prompt asks for (``#### N``, ``\\boxed{N}``, a fraction, or an option letter). With
``mistake_rate`` > 0 it slips by one on that share of attempts, like a sampled model,
so demos show retries, pass@k above accuracy, and majority votes at work.
"""

from __future__ import annotations

import random
import re
import threading
from fractions import Fraction
from typing import Any

from agentsgym_classical.arithmetic.generator import format_number, latex_number
from agentsgym_classical.arithmetic.solver import solve_text

OPTION = re.compile(r"^([A-J])\) (.+)$", re.MULTILINE)
GIVE_UP = "I do not know how to solve this problem."


class ArithmeticSolverAgent:
    """Plays the classical envs on the embedded problems (``classical/arithmetic-solver``)."""

    def __init__(self, mistake_rate: float = 0.0, seed: int | None = None) -> None:
        if not 0.0 <= mistake_rate <= 1.0:
            raise ValueError(f"mistake_rate must be between 0 and 1, got {mistake_rate}")
        self.mistake_rate = mistake_rate
        self._rng = random.Random(seed)
        self._lock = threading.Lock()  # episodes run in threads; one rng for all

    def get_action(self, messages: list[dict[str, str]], agent_state: Any) -> tuple[str, Any]:
        prompt = next((m.get("content", "") for m in messages if m.get("role") == "user"), "")
        solution = solve_text(prompt.split("\n\n", 1)[0])
        if solution is None:
            return GIVE_UP, agent_state
        answer = solution.answer
        if self.mistake_rate:
            with self._lock:
                if self._rng.random() < self.mistake_rate:
                    answer += 1
        work = "\n".join(solution.lines)
        return f"{work}\n{final_answer(prompt, answer)}", agent_state


def final_answer(prompt: str, answer: Fraction) -> str:
    """The answer line in the form the prompt asks for."""
    options = dict(OPTION.findall(prompt))
    if options:
        letter = next(
            (k for k, v in sorted(options.items()) if v.strip() == format_number(answer)), None
        )
        return f"The answer is \\boxed{{{letter or sorted(options)[0]}}}."
    if "#### <answer>" in prompt:
        return f"#### {format_number(answer)}"
    return f"The answer is \\boxed{{{latex_number(answer)}}}."
