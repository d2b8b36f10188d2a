"""check_env catches envs that break the contract, and names what broke."""

from __future__ import annotations

import random

import pytest

from agentsgym import MultistepEnv, StepResult, hookimpl
from agentsgym.testing import EnvCheckError, check_env


def test_builtin_env_passes(agentsgym_check_env) -> None:
    report = agentsgym_check_env("agentsgym/GuessTheNumber-v0")
    assert report.passed and len(report.checks) == 7


class Unseeded(MultistepEnv):
    """Ignores task_data's seed: two plays of one task differ."""

    @hookimpl
    def initialize_episode(self, session_id, task_data):
        return random.random()

    @hookimpl
    def format_prompt(self, state, step):
        return f"Number {state:.6f}?"

    @hookimpl
    def step_episode(self, state, action):
        return StepResult(state, 0.0, True, {})

    def get_train_dataset(self):
        return self.make_dataset([{"seed": 1}, {"seed": 2}])

    def get_eval_dataset(self):
        return self.make_dataset([{"seed": 2}])  # overlaps train


@hookimpl
def register_envs(register):
    register("bad/Unseeded-v0", f"{__name__}:Unseeded", description="breaks the contract")


def test_contract_breaches_are_all_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from agentsgym import plugins

    monkeypatch.setattr(plugins, "BUILTIN_PLUGIN_MODULES", (*plugins.BUILTIN_PLUGIN_MODULES, __name__))
    sys.modules.setdefault(__name__, sys.modules[__name__])
    with pytest.raises(EnvCheckError) as info:
        check_env("bad/Unseeded-v0")
    message = str(info.value)
    assert "eval tasks also in train" in message
    assert "deterministic" in message
    report = check_env("bad/Unseeded-v0", raise_on_failure=False)
    assert {c.name for c in report.failures} == {
        "datasets follow the row schema and survive parquet",
        "episodes are deterministic for the same task_data",
    }


def test_unknown_env_fails_the_first_check() -> None:
    report = check_env("agentsgym/Nope-v0", raise_on_failure=False)
    assert not report.passed and "no env registered" in report.checks[0].detail
    assert len(report.checks) == 1
