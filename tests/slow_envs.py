"""An env whose turns are slow, for tests of the time budgets (imported by class path)."""

from __future__ import annotations

import time

from agentsgym.hookspecs import hookimpl
from agentsgym.types import StepResult
from agentsgym_classical import GuessState, GuessTheNumberEnv

STEP_SECONDS = 1.5


class SlowStepGuessEnv(GuessTheNumberEnv):
    """GuessTheNumber whose step_episode takes STEP_SECONDS (a hung grader, say)."""

    run_hooks_inline = False  # its hooks wait: worker threads, as for any such env

    @hookimpl
    def step_episode(self, state: GuessState, action: str) -> StepResult:
        time.sleep(STEP_SECONDS)
        return super().step_episode(state, action)
