"""The warning after a slow first step of ``agentsgym train``: how long the rest will
take, and which options shorten it."""

from __future__ import annotations

from agentsgym.trainers import StepMetrics
from agentsgym_trl.train_pace import pace_warning


def first_step(seconds: float, *, cut: float) -> StepMetrics:
    return StepMetrics(
        step=1,
        num_rollouts=8,
        num_agent_tokens=18_339,
        seconds=seconds,
        extra={"truncated_replies": cut},
    )


def test_a_slow_first_step_says_how_long_the_rest_takes_and_what_shortens_it() -> None:
    # The tool-env run of the report: 18,339 agent tokens, every reply cut at 256.
    warning = pace_warning(
        first_step(510.0, cut=1.0), max_steps=2, max_new_tokens=256, max_steps_per_episode=10
    )
    assert warning is not None
    assert "18,339 agent tokens in 8 rollouts" in warning
    assert "100% of the replies cut at --max-new-tokens 256" in warning
    assert "the step left takes about 8 min" in warning
    assert "--max-new-tokens 16" in warning
    assert "--env-config max_steps_per_episode=3" in warning


def test_only_the_options_that_would_help_are_suggested() -> None:
    warning = pace_warning(
        first_step(100.0, cut=0.0), max_steps=10, max_new_tokens=256, max_steps_per_episode=2
    )
    assert warning is not None and "the 9 steps left take about 15 min" in warning
    assert "--max-new-tokens 16" not in warning  # no reply was cut: shorter ones would not help
    assert "max_steps_per_episode" not in warning  # already short episodes
    assert "fewer --num-rollouts or --tasks-per-step" in warning


def test_a_quick_run_or_its_last_step_warns_of_nothing() -> None:
    quick = pace_warning(
        first_step(5.0, cut=1.0), max_steps=10, max_new_tokens=256, max_steps_per_episode=10
    )
    assert quick is None
    last = pace_warning(
        first_step(600.0, cut=1.0), max_steps=1, max_new_tokens=256, max_steps_per_episode=10
    )
    assert last is None
