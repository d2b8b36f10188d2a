"""agentsgym.metrics and agentsgym.evaluation against hand-computed values."""

from __future__ import annotations

from math import comb

import pytest

from agentsgym.trajectory import Episode, StepRecord
from agentsgym_eval import metrics
from agentsgym_eval.samples import Sample, default_ks, sample_from_episode, summarize


# ------------------------------------------------------------------ pass@k
@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (10, 3, 1, 0.3),  # pass@1 is c/n
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (6, 2, 3, 0.8),  # 1 - C(4,3)/C(6,3) = 1 - 4/20
        (4, 1, 2, 0.5),  # 1 - C(3,2)/C(4,2) = 1 - 3/6
        (5, 4, 2, 1.0),  # n - c < k: every draw of 2 holds a correct one
        (4, 0, 4, 0.0),
        (4, 4, 1, 1.0),
        (3, 1, 3, 1.0),  # k = n: any correct sample passes
    ],
)
def test_pass_at_k_hand_computed(n: int, c: int, k: int, expected: float) -> None:
    assert metrics.pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_is_the_combinatorial_formula() -> None:
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1 - comb(n - c, k) / comb(n, k)
                assert metrics.pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12)


@pytest.mark.parametrize(("n", "c", "k"), [(0, 0, 1), (3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)])
def test_pass_at_k_rejects_impossible_arguments(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        metrics.pass_at_k(n, c, k)


def test_mean_pass_at_k() -> None:
    # tasks with (n, c) = (4, 1), (4, 0), (4, 4): pass@2 = (0.5 + 0 + 1) / 3
    assert metrics.mean_pass_at_k([(4, 1), (4, 0), (4, 4)], 2) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        metrics.mean_pass_at_k([], 1)


# ------------------------------------------------------------------ votes, best, accuracy
def test_majority_vote() -> None:
    assert metrics.majority_vote(["3", "4", "4", None, None, None]) == "4"  # None never votes
    assert metrics.majority_vote(["5", "6", "6", "5"]) == "5"  # tie: first seen
    assert metrics.majority_vote([None, None]) is None
    assert metrics.majority_vote([]) is None


def test_cons_at_k() -> None:
    answers = ["4", "3", "3", "4", "4"]
    correct = [True, False, False, True, True]
    assert metrics.cons_at_k(answers, correct) is True  # "4" wins 3 to 2
    assert metrics.cons_at_k(answers, correct, k=3) is False  # first 3: "3" wins 2 to 1
    assert metrics.cons_at_k([None, None], [False, False]) is False
    assert metrics.cons_at_k(["7", None, None], [True, False, False]) is True
    with pytest.raises(ValueError):
        metrics.cons_at_k(["1"], [True, False])
    with pytest.raises(ValueError):
        metrics.cons_at_k(["1"], [True], k=2)


def test_best_at_k_and_accuracy() -> None:
    assert metrics.best_at_k([0.2, 0.9, -1.0, 0.5]) == 0.9
    assert metrics.best_at_k([0.2, 0.9, -1.0, 0.5], k=1) == 0.2
    assert metrics.accuracy([True, False, True, True]) == 0.75
    with pytest.raises(ValueError):
        metrics.accuracy([])
    with pytest.raises(ValueError):
        metrics.best_at_k([1.0], k=2)


# ------------------------------------------------------------------ evaluation
def sample(task: int, rollout: int, answer: str | None, correct: bool, reward: float) -> Sample:
    return Sample(
        task_index=task,
        rollout_index=rollout,
        task_data={},
        answer=answer,
        correct=correct,
        final_reward=reward,
        num_turns=1,
    )


def test_summarize_hand_computed() -> None:
    samples = [
        # task 0: 1 of 4 correct; votes 5,5,7,None -> "5" (wrong)
        sample(0, 0, "7", True, 1.0),
        sample(0, 1, "5", False, 0.0),
        sample(0, 2, "5", False, 0.0),
        sample(0, 3, None, False, -0.5),
        # task 1: 3 of 4 correct; votes 2,2,2,9 -> "2" (right)
        sample(1, 0, "2", True, 0.8),
        sample(1, 1, "2", True, 1.0),
        sample(1, 2, "9", False, 0.0),
        sample(1, 3, "2", True, 0.9),
    ]
    report = summarize(samples, env_id="x/Y-v0")
    assert report.num_tasks == 2 and report.num_rollouts == 4 and report.num_samples == 8
    assert report.accuracy == pytest.approx(4 / 8)
    # pass@1 = (1/4 + 3/4) / 2; pass@2 = ((1 - C(3,2)/C(4,2)) + (1 - 0)) / 2 = (0.5 + 1) / 2
    assert report.pass_at_k == pytest.approx({1: 0.5, 2: 0.75, 4: 1.0})
    assert report.cons_at_k == pytest.approx(0.5)
    assert report.best_at_k == pytest.approx((1.0 + 1.0) / 2)
    assert report.mean_reward == pytest.approx((1.0 - 0.5 + 0.8 + 1.0 + 0.9) / 8)


def test_summarize_needs_equal_sample_counts() -> None:
    with pytest.raises(ValueError, match="different numbers"):
        summarize(
            [
                sample(0, 0, None, False, 0),
                sample(1, 0, None, False, 0),
                sample(1, 1, None, False, 0),
            ],
            env_id="x",
        )
    with pytest.raises(ValueError):
        summarize([], env_id="x")


def test_default_ks() -> None:
    assert default_ks(1) == [1]
    assert default_ks(4) == [1, 2, 4]
    assert default_ks(10) == [1, 2, 4, 8, 10]


def episode(infos: list[dict], reward: float, error: str | None = None) -> Episode:
    ep = Episode(
        session_id="s", env_id="x/Y-v0", task_data={"q": 1}, final_reward=reward, error=error
    )
    ep.steps = [StepRecord(action="a", reward=0.0, done=False, info=info) for info in infos]
    return ep


def test_sample_from_episode_reads_correct_and_answer() -> None:
    s = sample_from_episode(
        episode([{"correct": False, "answer": "3"}, {"correct": True, "answer": "4"}], 0.9)
    )
    assert s.correct and s.answer == "4" and s.num_turns == 2
    # the answer is the last one given; an unparsed last attempt does not erase it
    s = sample_from_episode(
        episode([{"correct": False, "answer": "3"}, {"correct": False, "answer": None}], 0)
    )
    assert not s.correct and s.answer == "3"
    # non-string answers become a stable JSON vote
    assert sample_from_episode(episode([{"answer": [1, 2]}], 1.0)).answer == "[1, 2]"


def test_sample_from_episode_without_correct_key_uses_reward() -> None:
    assert sample_from_episode(episode([{}], 1.0)).correct
    assert not sample_from_episode(episode([{}], 0.0)).correct


def test_failed_episode_is_a_wrong_sample_without_answer() -> None:
    s = sample_from_episode(
        episode([{"correct": True, "answer": "4"}], 1.0, error="ValueError: boom")
    )
    assert not s.correct and s.answer is None and s.error == "ValueError: boom"


def test_an_ungraded_attempt_is_counted_apart_and_never_as_correct() -> None:
    from agentsgym import StepResult, hookimpl
    from agentsgym_classical import BisectAgent, GuessTheNumberEnv
    from agentsgym_eval.samples import evaluate

    class SlowGrader(GuessTheNumberEnv):
        """Reports every attempt at the target 25 as not graded (a grader timeout)."""

        @hookimpl
        def step_episode(self, state, action):
            if state.target == 25:
                return StepResult(state, 0.0, True, {"correct": False, "graded": False})
            return GuessTheNumberEnv.step_episode(self, state, action)

    env = SlowGrader(env_config={})
    samples, report = evaluate(env, BisectAgent(), [{"target": 50}, {"target": 25}], 2)
    graded = {s.task_index: s.graded for s in samples}
    assert graded == {0: True, 1: False}
    assert report.num_ungraded == 2 and report.num_failed == 0
    assert report.accuracy == 0.5  # the ungraded ones count as not correct


def test_a_failed_sample_keeps_its_error_without_secrets() -> None:
    s = sample_from_episode(
        episode([{}], 0.0, error="AgentError: cannot reach http://sk-1@host/v1 (api_key=sk-2 ok)")
    )
    assert s.error == "AgentError: cannot reach http://<redacted>@host/v1 (api_key=<redacted> ok)"
