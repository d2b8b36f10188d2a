"""Pathological replies are judged in bounded time, in threads, without crashing.

Most are judged wrong (or unreadable) at once. One that math-verify cannot finish at
all (a power tower) stays ungraded however often it is tried: its episode fails with
a ``GradingError`` once the grading budget is spent, rather than be scored.

Timings are logged and only asserted against generous bounds (the deadline plus
slack for a loaded CI machine): the point is "bounded", not "fast".
"""

from __future__ import annotations

import logging
import threading
import time

import pytest

import agentsgym
from agentsgym import ScriptedAgent
from agentsgym_classical.grading import RETRY_FACTOR, Verdict, grade, try_deadlines
from agentsgym_classical.grading.guards import nesting_depth
from agentsgym_classical.grading.pool import get_pool

logger = logging.getLogger(__name__)

TIMEOUT = 5.0
# two tries (the deadline, then RETRY_FACTOR times it), as the budget below allows
BUDGET = TIMEOUT * (1 + RETRY_FACTOR)
# the tries' deadlines, worker restarts, CI slack
BOUND = BUDGET + 10.0

PATHOLOGICAL = {
    "power tower": "9^9^9^9^9",
    "boxed power tower": "The answer is \\boxed{9^{9^{9^{9^{9}}}}}",
    "huge factorial": "\\boxed{(10^{10})!}",
    "1 MB reply": "lorem ipsum 18 " * 70_000,
    "unbalanced latex": "\\boxed{\\frac{1}{2",
    "unbalanced latex 2": "$\\frac{\\sqrt{\\left(3}{2}$ \\boxed{\\frac{",
    "deep nesting": "\\boxed{" + "\\frac{1}{" * 200 + "2" + "}" * 200 + "}",
}


def grade_in_thread(reply: str, **kwargs: object) -> tuple[Verdict, float]:
    """Grade from a non-main thread, as the runner does."""
    result: dict[str, object] = {}

    def run() -> None:
        start = time.perf_counter()
        result["verdict"] = grade("18", reply, **kwargs)  # type: ignore[arg-type]
        result["seconds"] = time.perf_counter() - start

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(BOUND)
    assert not thread.is_alive(), f"grading hung for more than {BOUND}s"
    return result["verdict"], result["seconds"]  # type: ignore[return-value]


@pytest.mark.parametrize("name", list(PATHOLOGICAL))
def test_pathological_reply_is_wrong_in_bounded_time(name: str) -> None:
    verdict, seconds = grade_in_thread(
        PATHOLOGICAL[name], timeout_seconds=TIMEOUT, budget_seconds=BUDGET
    )
    logger.info("%s: %s in %.3fs", name, verdict.status, seconds)
    assert not verdict.correct, verdict
    assert seconds < BOUND


def test_size_and_nesting_guards_answer_without_a_worker() -> None:
    verdict, seconds = grade_in_thread(PATHOLOGICAL["1 MB reply"])
    assert verdict.status == "too_long" and seconds < BOUND  # answered before any worker
    verdict, _ = grade_in_thread(PATHOLOGICAL["deep nesting"])
    assert verdict.status == "too_nested"
    assert nesting_depth("}}{a{b}(c[d])") == 3


def test_hard_deadline_kills_the_worker_and_grading_goes_on() -> None:
    pool = get_pool()
    restarts = pool.restarts
    # math-verify's own timeout inside the worker is 1 s; a 0.3 s deadline must cut it,
    # and the retry's 1.2 s deadline (its math-verify budget is 4 s) again.
    assert list(try_deadlines(0.3, 1.5)) == [0.3, 1.2]
    verdict, seconds = grade_in_thread(
        PATHOLOGICAL["power tower"], timeout_seconds=0.3, budget_seconds=1.5
    )
    assert verdict.status == "timeout" and verdict.attempts == 2 and seconds < BOUND
    assert pool.restarts == restarts + 2
    again, _ = grade_in_thread("\\boxed{18}")
    assert again.correct


def test_pathological_replies_that_can_be_read_do_not_fail_episodes() -> None:
    env = agentsgym.make("classical/Arithmetic-v0", env_config={"max_steps_per_episode": 3})
    tasks = [row["task_data"] for row in env.get_eval_dataset().select(range(2))]
    agent = ScriptedAgent(
        [PATHOLOGICAL["1 MB reply"], PATHOLOGICAL["deep nesting"], "\\boxed{\\frac{1}{2"]
    )
    batch = env.run_trial(tasks, agent, num_rollouts=2, max_concurrency=4)
    assert not batch.failed
    for episode in batch.episodes:
        assert [s.info["status"] for s in episode.steps] == ["too_long", "too_nested", "wrong"]
        assert episode.final_reward == pytest.approx(-0.2)  # two extra attempts, none right


def test_a_reply_math_verify_cannot_finish_fails_its_episode() -> None:
    # math-verify times out on the power tower whatever its budget: never judged, so
    # never scored as wrong or unparsed; the episode fails once the budget is spent.
    config = {"grading_timeout_seconds": TIMEOUT, "grading_budget_seconds": BUDGET}
    env = agentsgym.make("classical/Arithmetic-v0", env_config=config)
    task = env.get_eval_dataset()[0]["task_data"]
    batch = env.run_trial([task], ScriptedAgent([PATHOLOGICAL["power tower"]]), 1)
    (failed,) = batch.failed
    assert (failed.error or "").startswith("GradingError: attempt 1 at problem")
    assert "2 tries within the 25s grading budget" in (failed.error or "")
    assert not batch.episodes
