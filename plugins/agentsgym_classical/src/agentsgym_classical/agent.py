"""The scripted baseline: solves the embedded arithmetic problems in any classical format.

It reads the problem from the conversation, solves it exactly with
:func:`agentsgym_classical.arithmetic.solve_text`, and answers in the form the
prompt asks for (``#### N``, ``\\boxed{N}``, a fraction, or an option letter). With
``mistake_rate`` > 0 it slips by one on that share of attempts, like a sampled model,
so demos show retries, pass@k above accuracy, and majority votes at work.

Whether an attempt slips is drawn from its own generator, seeded by the agent's
``seed``, the rollout and the attempt (see :func:`attempt_random`), never from one
generator shared by every episode: episodes finish in whatever order the machine
runs them, so shared draws would make a seeded run differ from run to run.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from fractions import Fraction
from typing import Any

from agentsgym import EpisodeContext
from agentsgym_classical.arithmetic.generator import format_number, latex_number
from agentsgym_classical.arithmetic.solver import solve_text

OPTION = re.compile(r"^([A-J])\) (.+)$", re.MULTILINE)
GIVE_UP = "I do not know how to solve this problem."


class ArithmeticSolverAgent:
    """Plays the classical envs on the embedded problems (``classical/arithmetic-solver``).

    :param mistake_rate: the share of attempts that slip by one.
    :param seed: with the per-rollout seed the runner passes (``context.seed``), it
        decides which attempts slip: the same seed gives the same replies in every run,
        whatever the concurrency or executor, and the rollouts of a task differ.
    """

    def __init__(self, mistake_rate: float = 0.0, seed: int = 0) -> None:
        if not 0.0 <= mistake_rate <= 1.0:
            raise ValueError(f"mistake_rate must be between 0 and 1, got {mistake_rate}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an integer, got {seed!r}")
        self.mistake_rate = mistake_rate
        self.seed = seed

    def get_action(
        self,
        messages: list[dict[str, str]],
        agent_state: Any,
        *,
        context: EpisodeContext | None = None,
    ) -> tuple[str, Any]:
        prompt = next((m.get("content", "") for m in messages if m.get("role") == "user"), "")
        solution = solve_text(prompt.split("\n\n", 1)[0])
        if solution is None:
            return GIVE_UP, agent_state
        answer = solution.answer
        if self.mistake_rate and self._slips(messages, context):
            answer += 1
        work = "\n".join(solution.lines)
        return f"{work}\n{final_answer(prompt, answer)}", agent_state

    def _slips(self, messages: list[dict[str, str]], context: EpisodeContext | None) -> bool:
        return attempt_random(self.seed, messages, context).random() < self.mistake_rate


def attempt_random(
    seed: int, messages: list[dict[str, str]], context: EpisodeContext | None
) -> random.Random:
    """The generator of one attempt, from the agent's seed and where the attempt is.

    With a ``context`` (the runner always gives one) that is the rollout's seed, which
    the runner derives from the run's seed, the env, the task and the rollout index,
    plus the episode and step. Without one (a direct call) it is the conversation so
    far, so equal conversations get equal replies. Either way the draw depends on
    nothing shared between episodes, nor on the order in which they run.
    """
    where: list[Any]
    if context is not None:
        where = ["context", context.seed, context.episode_index, context.step]
    else:
        where = ["messages", messages]
    blob = json.dumps([seed, *where], sort_keys=True, default=str).encode()
    return random.Random(int.from_bytes(hashlib.blake2b(blob, digest_size=8).digest(), "big"))


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
