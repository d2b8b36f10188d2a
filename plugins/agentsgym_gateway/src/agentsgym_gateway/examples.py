"""The example harness envs: an addition task played by two unmodified programs.

* ``gateway/OpenAIToolLoop-v0``: a plain ``openai`` client tool loop;
* ``gateway/AgentsSDK-v0``: an OpenAI Agents SDK app with one function tool;
* ``gateway/PydanticAI-v0``: a pydantic-ai agent with one tool (Chat Completions).

A task is ``{"a": int, "b": int}``; the program gets "What is a + b?" on stdin and
scores 1.0 when the sum is in its final output. They need ``openai``, and
``openai-agents`` or ``pydantic-ai-slim[openai]``, installed where they run.
"""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path
from typing import Any, ClassVar

from agentsgym_gateway.harness import HarnessEnv
from agentsgym_gateway.programs import CommandProgram, ProgramOutcome

PROGRAMS = Path(__file__).resolve().parent / "example_programs"


def _additions(seed: int, count: int) -> list[dict[str, int]]:
    rng = random.Random(seed)
    return [{"a": rng.randint(1, 99), "b": rng.randint(1, 99)} for _ in range(count)]


class AdditionHarness(HarnessEnv):
    """Addition tasks; subclasses name the program."""

    program_file: ClassVar[str] = ""
    environment: ClassVar[dict[str, str]] = {}

    def program(self, task_data: dict[str, Any]) -> CommandProgram:
        return CommandProgram(
            (sys.executable, str(PROGRAMS / self.program_file)), dict(self.environment)
        )

    def get_train_dataset(self) -> Any:
        return self.make_dataset(_additions(seed=0, count=64))

    def get_eval_dataset(self) -> Any:
        return self.make_dataset(_additions(seed=1, count=16))

    def prepare(self, task_data: dict[str, Any], workdir: Path) -> str:
        return f"What is {task_data['a']} + {task_data['b']}?"

    def verify(self, task_data: dict[str, Any], workdir: Path, outcome: ProgramOutcome) -> float:
        expected = str(int(task_data["a"]) + int(task_data["b"]))
        return 1.0 if expected in re.findall(r"-?\d+", outcome.stdout) else 0.0


class OpenAIToolLoopEnv(AdditionHarness):
    program_file: ClassVar[str] = "openai_tool_loop.py"


class PydanticAIEnv(AdditionHarness):
    program_file: ClassVar[str] = "pydantic_ai_calculator.py"


class AgentsSDKEnv(AdditionHarness):
    program_file: ClassVar[str] = "agents_sdk_calculator.py"
    # The SDK exports traces to OpenAI's servers by default: off, the run is offline.
    environment: ClassVar[dict[str, str]] = {"OPENAI_AGENTS_DISABLE_TRACING": "1"}
