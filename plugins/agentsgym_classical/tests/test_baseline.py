"""The embedded family and the scripted solver registered for demos."""

from __future__ import annotations

from fractions import Fraction

import pytest

import agentsgym
from agentsgym_classical.arithmetic import generate, generate_split, solve_text
from agentsgym_classical.arithmetic.ops import MAX_VALUE

# the baselines are scored as `agentsgym eval` scores them (agentsgym-eval)
evaluate = pytest.importorskip("agentsgym_eval", reason="needs agentsgym-eval").evaluate

ENV_IDS = [
    "classical/Arithmetic-v0",
    "classical/GSM8K-v0",
    "classical/MATH-v0",
    "classical/AIME-v0",
    "classical/MultipleChoice-v0",
]


def test_generation_is_deterministic_and_exact() -> None:
    assert generate(7) == generate(7) and generate(7) != generate(8)
    for _, problem in generate_split("train", 300):
        values = [problem.start, *(step.result for step in problem.steps)]
        assert all(v.denominator == 1 and 1 <= v <= MAX_VALUE for v in map(Fraction, values))
        assert 2 <= len(problem.steps) <= 4
        for question in ("count", "fraction"):
            solution = solve_text(problem.text(question))
            assert solution is not None and solution.answer == problem.answer(question)


def test_solver_gives_up_on_other_problems() -> None:
    assert solve_text("What is the integral of x^2 from 0 to 1?") is None


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_baseline_solves_the_generated_family(env_id: str) -> None:
    env = agentsgym.make(env_id, env_config={"num_tasks": 40})
    tasks = [row["task_data"] for row in env.get_eval_dataset()]
    samples, report = evaluate(env, agentsgym.make_agent("classical/arithmetic-solver"), tasks, 2)
    assert report.accuracy == 1.0 and report.pass_at_k[2] == 1.0 and report.cons_at_k == 1.0
    assert all(s.num_turns == 1 for s in samples)


def test_a_sloppy_baseline_needs_retries() -> None:
    env = agentsgym.make("classical/Arithmetic-v0", env_config={"num_tasks": 40})
    tasks = [row["task_data"] for row in env.get_eval_dataset()]
    agent = agentsgym.make_agent("classical/arithmetic-solver", mistake_rate=0.5, seed=0)
    _, report = evaluate(env, agent, tasks, 4)
    assert report.mean_turns > 1.2  # slips were caught and retried
    assert 0.7 < report.accuracy <= 1.0  # 3 attempts at 50% each: 87.5% expected
    assert report.mean_reward < report.accuracy  # extra attempts cost attempt_penalty


def test_check_env_passes_for_every_id(agentsgym_check_env) -> None:  # type: ignore[no-untyped-def]
    for env_id in ENV_IDS:
        agentsgym_check_env(env_id, env_config={"num_tasks": 20})
