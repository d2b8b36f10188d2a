"""Grading never turns "the machine was slow" into "wrong".

* math-verify's own timeout is a ``timeout`` verdict, never ``wrong``;
* correct answers of every kind, graded from threads (as the runner does) while CPU
  burners load every core three times over, all come back ``correct``.

What happens to a reply that stays ungraded (tried again within a budget, then the
episode fails) is tested with a fake grader in ``test_grading_retries.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from agentsgym_classical.grading import Verdict, grade
from agentsgym_classical.grading.judge import judge
from agentsgym_classical.grading.verdict import GradeRequest

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
