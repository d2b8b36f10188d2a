"""A reply that could not be graded is never scored (issue 21.20).

Grading is tried again with a growing budget until ``grading_budget_seconds`` is spent;
a reply still ungraded fails its episode with a ``GradingError`` instead of earning
``unparsed_reward`` and another attempt. The grader here is a fake pool told how many
times to time out: nothing depends on the machine's load or on the clock.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentsgym
from agentsgym import ScriptedAgent
from agentsgym_classical import grading
from agentsgym_classical.errors import GradingError
from agentsgym_classical.grading import DEFAULT_BUDGET_SECONDS, Verdict, grade, try_deadlines
from agentsgym_classical.grading.verdict import GradeRequest, Status

TASK = {"id": "t/0", "problem": "What is 3 * 6?", "answer": "18"}
ARITHMETIC = "classical/Arithmetic-v0"


class FakePool:
    """Answers ``status`` (ungraded) ``failures`` times, then judges the reply correct;
    records the (math-verify budget, deadline) of every try."""

    def __init__(self, failures: int, status: Status = "timeout") -> None:
        self.failures = failures
        self.status = status
        self.calls: list[tuple[int, float]] = []

    def grade(self, request: GradeRequest, timeout: float) -> Verdict:
        self.calls.append((request.timeout_seconds, timeout))
        if len(self.calls) <= self.failures:
            return Verdict(status=self.status, detail="slow machine", seconds=timeout)
        return Verdict(status="correct", answer="18", extracted="18", seconds=0.5)


@pytest.fixture
def fake_pool(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``fake_pool(failures, status)`` installs a FakePool as the process's grader."""

    def install(failures: int, status: Status = "timeout") -> FakePool:
        pool = FakePool(failures, status)
        monkeypatch.setattr(grading, "get_pool", lambda: pool)
        return pool

    return install


# ---------------------------------------------------------------------- grade()
def test_the_tries_grow_and_fit_the_budget() -> None:
    assert list(try_deadlines(5, DEFAULT_BUDGET_SECONDS)) == [5, 20, 80]
    assert list(try_deadlines(10, 210)) == [10, 40, 160]
    assert list(try_deadlines(10, 209)) == [10, 40]  # the third would not fit
    assert list(try_deadlines(0.3, 1.5)) == [0.3, 1.2]
    assert list(try_deadlines(30, 10)) == [30]  # the first try is always made


@pytest.mark.parametrize("status", ["timeout", "error"])
def test_an_ungraded_reply_is_graded_again_until_it_is_judged(
    fake_pool: Any, status: Status
) -> None:
    pool = fake_pool(2, status)
    verdict = grade("18", "\\boxed{18}", timeout_seconds=10, budget_seconds=210)
    # math-verify's own budget is a fifth of the first deadline, and grows with it
    assert pool.calls == [(2, 10), (8, 40), (32, 160)]
    assert verdict.correct and verdict.attempts == 3
    assert verdict.seconds == pytest.approx(10 + 40 + 0.5)


def test_a_reply_never_judged_within_the_budget_stays_ungraded(fake_pool: Any) -> None:
    pool = fake_pool(99)
    verdict = grade("18", "\\boxed{18}", timeout_seconds=10, budget_seconds=100)
    assert pool.calls == [(2, 10), (8, 40)]  # 10 + 40 s; another 160 s would not fit
    assert verdict.status == "timeout" and not verdict.graded and verdict.attempts == 2


def test_a_judged_reply_is_not_graded_again(fake_pool: Any) -> None:
    pool = fake_pool(0)
    assert grade("18", "\\boxed{18}", timeout_seconds=10).attempts == 1
    assert pool.calls == [(2, 10)]


# ---------------------------------------------------------------------- the env
def play(task: dict[str, Any], replies: list[str], **config: Any) -> Any:
    env = agentsgym.make(ARITHMETIC, env_config=config)
    return env.run_trial([task], ScriptedAgent(replies), 1)


def test_an_ungradable_reply_fails_the_episode_and_is_never_scored(fake_pool: Any) -> None:
    pool = fake_pool(99)
    # a distinctive unparsed_reward, so that it would show if the reply were scored
    batch = play(TASK, ["\\boxed{18}", "\\boxed{18}"], unparsed_reward=-7.0)
    assert not batch.episodes  # no row of it reaches a training batch
    (failed,) = batch.failed
    error = failed.error or ""
    assert error.startswith("GradingError: attempt 1 at problem 't/0' could not be graded")
    assert "3 tries within the 120s grading budget" in error and "slow machine" in error
    assert "grading_budget_seconds" in error  # what to do about it
    assert len(pool.calls) == 3  # 5 + 20 + 80 s of the budget, then nothing else graded
    assert all(step.reward != -7.0 for step in failed.steps)
    assert all(step.info.get("status") != "unparsed" for step in failed.steps)
    assert failed.num_turns <= 1  # no second attempt was offered


def test_grading_error_is_an_episode_error() -> None:
    from agentsgym.errors import EpisodeError

    assert issubclass(GradingError, EpisodeError)


def test_a_reply_graded_on_its_second_try_earns_its_reward(fake_pool: Any) -> None:
    fake_pool(1)
    batch = play(TASK, ["\\boxed{18}"], unparsed_reward=-7.0)
    assert not batch.failed
    (episode,) = batch.episodes
    assert episode.final_reward == 1.0 and episode.num_turns == 1
    info = episode.steps[0].info
    assert info["status"] == "correct" and info["graded"] is True
    assert info["grading_attempts"] == 2


def test_the_budget_comes_from_env_config(fake_pool: Any) -> None:
    pool = fake_pool(99)
    play(TASK, ["\\boxed{18}"], grading_timeout_seconds=2, grading_budget_seconds=42)
    assert pool.calls == [(1, 2), (4, 8), (16, 32)]


def test_the_cli_counts_ungradable_trials_as_failed(fake_pool: Any, tmp_path: Path) -> None:
    from agentsgym.testing import run_cli

    fake_pool(10**6)  # the CLI plays in this process (local executor): it grades here
    out = tmp_path / "out.jsonl"
    result = run_cli(
        "rollout",
        ARITHMETIC,
        "--num-tasks",
        "2",
        "--num-rollouts",
        "1",
        "--tokenizer",
        "none",
        "--out",
        str(out),
        "--max-failure-rate",
        "0.5",
    )
    assert result.code == 1, result.output
    assert "every trial failed (2 of 2)" in result.output
    assert "GradingError" in result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(row["error"].startswith("GradingError: ") for row in rows)
