"""Grading never turns "the machine was slow" into "wrong".

* math-verify's own timeout is a ``timeout`` verdict, retried once with a larger
  budget, never ``wrong``;
* a timeout is counted apart by ``agentsgym eval`` (``num_ungraded``);
* correct answers of every kind, graded from threads (as the runner does) while CPU
  burners load every core three times over, all come back ``correct``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import agentsgym
from agentsgym_classical import env as env_module
from agentsgym_classical import grading
from agentsgym_classical.grading import RETRY_FACTOR, Verdict, grade
from agentsgym_classical.grading.judge import judge
from agentsgym_classical.grading.verdict import GradeRequest

# the baselines are scored as `agentsgym eval` scores them (agentsgym-eval)
evaluate = pytest.importorskip("agentsgym_eval", reason="needs agentsgym-eval").evaluate

pytestmark = pytest.mark.timeout(900)

MATH = [  # (gold, a correct reply): every kind of answer the grader reads
    ("18", "Adding up, the total is \\boxed{18}."),
    ("72", "48 + 24 = 72\n#### 72"),
    ("1234", "The sum is\n#### 1,234"),
    ("18", "She pays 18 dollars.\n#### 18 dollars"),
    ("\\frac{3}{4}", "#### \\frac{3}{4}"),
    ("18", "So she has 18 apples left."),
    ("18", "The answer is 18.00"),
    ("\\frac{3}{4}", "The probability is 3/4."),
    ("\\frac{3}{4}", "The probability is 0.75"),
    ("\\frac{\\sqrt{3}}{2}", "$\\sin 60^\\circ = \\boxed{\\dfrac{\\sqrt3}{2}}$"),
    ("3\\pi", "The area is \\boxed{3\\pi}."),
    ("20", "The discount is 20%."),
    ("-\\frac{1}{2}", "\\boxed{-0.5}"),
    ("24", "\\boxed{024}"),
]
CHOICES = {"A": "30", "B": "40", "C": "45", "D": "50", "E": "90"}
CHOICE = ["\\boxed{B}", "The answer is (B).", "Answer: B", "**B**", "60 / 1.5 = 40, so 40"]


def test_a_math_verify_timeout_is_a_timeout_verdict_not_wrong() -> None:
    # In this process's main thread math-verify's alarm works: 9^9^9^9^9 exhausts it.
    verdict = judge(GradeRequest(gold="18", reply="9^9^9^9^9", timeout_seconds=1))
    assert verdict.status == "timeout" and not verdict.graded
    assert "math-verify" in verdict.detail
    # an ordinary wrong answer is still wrong
    assert judge(GradeRequest(gold="18", reply="\\boxed{19}")).status == "wrong"


class FakePool:
    """Answers ``timeout`` until told otherwise; records the budgets it was given."""

    def __init__(self, timeouts: int) -> None:
        self.timeouts = timeouts
        self.calls: list[tuple[int, float]] = []

    def grade(self, request: GradeRequest, timeout: float) -> Verdict:
        self.calls.append((request.timeout_seconds, timeout))
        if len(self.calls) <= self.timeouts:
            return Verdict(status="timeout", detail="slow", seconds=timeout)
        return Verdict(status="correct", answer="18", seconds=0.1)


@pytest.mark.parametrize("timeouts", [1, 2])
def test_a_timeout_is_retried_once_with_a_larger_budget(monkeypatch: Any, timeouts: int) -> None:
    pool = FakePool(timeouts)
    monkeypatch.setattr(grading, "get_pool", lambda: pool)
    verdict = grade("18", "\\boxed{18}", timeout_seconds=10)
    assert pool.calls == [(2, 10), (2 * RETRY_FACTOR, 10 * RETRY_FACTOR)]
    assert verdict.attempts == 2
    assert verdict.status == ("correct" if timeouts == 1 else "timeout")
    assert verdict.seconds == pytest.approx(10 + (0.1 if timeouts == 1 else 40))


def test_an_ungraded_reply_is_counted_apart_in_eval(monkeypatch: Any) -> None:
    def never_judged(*args: Any, **kwargs: Any) -> Verdict:
        return Verdict(status="timeout", detail="slow machine", attempts=2)

    monkeypatch.setattr(env_module, "grade", never_judged)
    env = agentsgym.make("classical/Arithmetic-v0", env_config={"max_steps_per_episode": 1})
    tasks = list(env.get_eval_dataset()["task_data"][:2])
    samples, report = evaluate(env, agentsgym.make_agent("classical/arithmetic-solver"), tasks, 2)
    assert report.num_ungraded == 4 and report.num_samples == 4 and report.accuracy == 0.0
    assert all(not s.graded and not s.correct for s in samples)
    info = samples[0].step_infos[0]
    assert info["graded"] is False and info["grading_attempts"] == 2


@pytest.fixture
def burners() -> Iterator[int]:
    """Three busy-looping processes per core, for the length of the test."""
    count = 3 * (os.cpu_count() or 1)
    processes = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield count
    finally:
        for process in processes:
            process.kill()
        for process in processes:
            process.wait()


def test_correct_answers_of_every_kind_stay_correct_under_cpu_load(burners: int) -> None:
    jobs = [(gold, reply, "math", None) for gold, reply in MATH]
    jobs += [("B", reply, "choice", CHOICES) for reply in CHOICE]

    def judge_one(job: tuple[str, str, Any, Any]) -> Verdict:
        gold, reply, kind, choices = job
        return grade(gold, reply, kind=kind, choices=choices)

    # from threads, as the runner grades, several at once
    with ThreadPoolExecutor(max_workers=8) as threads:
        verdicts = list(threads.map(judge_one, jobs))
    wrong = [(job[1], v.status, v.detail) for job, v in zip(jobs, verdicts) if not v.correct]
    assert not wrong, f"graded as not correct under load ({burners} burners): {wrong}"
