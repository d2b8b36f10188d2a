"""A reply too costly to read whole is judged by its answer region, never timed out.

math-verify's regexes backtrack over the text they read: over a 100 kB reply of
repeated numbers they never finish, and such a reply used to time out on every try
and fail its episode with a ``GradingError``, as if the machine had been too busy.
math-verify now reads only a reply's answer region (``normalize.answer_region``: from
shortly before its last ``\\boxed{`` on, else its last 2,000 characters), so a
degenerate reply gets the verdict of its region, ``wrong`` or ``unparsed``, whatever
the machine and its load, and the env scores it as such. A busy machine (a grader that
times out) still fails the episode (``test_grading_retries.py``).

Nothing here depends on the clock: the verdicts are asserted, not the seconds.
"""

from __future__ import annotations

import pytest

import agentsgym
from agentsgym import ScriptedAgent
from agentsgym_classical import grading
from agentsgym_classical.grading import Verdict, grade
from agentsgym_classical.grading.normalize import (
    ANSWER_REGION_CHARS,
    BOX_GAP,
    BOX_PREFIX,
    BOXED,
    MAX_BOXES,
    answer_region,
    answer_tail,
)
from agentsgym_classical.grading.verdict import GradeRequest

ARITHMETIC = "classical/Arithmetic-v0"
CHOICE = "classical/MultipleChoice-v0"
TASK = {"id": "t/0", "problem": "What is 3 * 6?", "answer": "18"}
CHOICES = {"A": "30", "B": "40", "C": "45", "D": "50", "E": "90"}
REGION_BOUND = BOX_PREFIX + (MAX_BOXES - 1) * BOX_GAP + ANSWER_REGION_CHARS

# (name, reply, verdict): replies a rambling or repeating model writes, up to the
# 100,000-character limit, each of which math-verify could not read whole in any budget
# (or in a quadratic, quartic number of regex steps), with the verdict of its region.
DEGENERATE = [
    ("numbers and spaces", "1 " * 50_000, "wrong"),  # its last number, 1
    ("numbers on lines", "7\n" * 50_000, "wrong"),
    ("numbers and tabs", "12\t" * 33_333, "wrong"),
    ("decimals and spaces", "1 1.1 " * 16_666, "wrong"),
    ("answer and dollars", "answer: $" * 11_111, "wrong"),
    ("empty display boxes", "$$\\boxed{}" * 10_000, "unparsed"),
    ("empty inline boxes", "\\(\\boxed{}\\)" * 8_333, "unparsed"),
    ("dollars", "$1$ " * 25_000, "wrong"),
    ("bracketed numbers", "[50]" * 25_000, "unparsed"),
    ("spaced bracketed numbers", "[ 7 ]" * 20_000, "wrong"),
    ("one letter", "x" * 100_000, "unparsed"),
    ("newlines", "\n" * 100_000, "unparsed"),
]
IDS = [case[0] for case in DEGENERATE]


# ---------------------------------------------------------------------- the region
def test_a_reply_without_a_box_is_read_from_its_end() -> None:
    reply = "x" * 5_000 + "So the answer is 18."
    assert answer_region(reply) == reply[-ANSWER_REGION_CHARS:]
    assert answer_region("The answer is 18.") == "The answer is 18."  # short: all of it
    assert answer_tail(reply) == reply[-ANSWER_REGION_CHARS:]


def test_a_boxed_reply_is_read_from_its_last_box() -> None:
    reply = "\\boxed{17} " + "y" * 1_000 + "so $x = \\boxed{18}$. " + "z" * 5_000
    region = answer_region(reply)
    assert region.startswith("y" * (BOX_PREFIX - len("so $x = ")) + "so $x = \\boxed{18}$")
    assert len(region) == BOX_PREFIX + ANSWER_REGION_CHARS
    assert "\\boxed{17}" not in region


def test_a_list_of_boxed_answers_is_read_together() -> None:
    reply = "x" * 3_000 + "The roots are $\\boxed{2}$, $\\boxed{3}$ and $\\boxed{5}$."
    assert answer_region(reply).endswith("$\\boxed{2}$, $\\boxed{3}$ and $\\boxed{5}$.")
    assert grade("2, 3, 5", reply).status == "correct"


def test_the_prefix_never_reaches_into_a_box_left_out() -> None:
    reply = "\\boxed{1}" + " " * (BOX_GAP + 1) + "\\boxed{2}"
    assert answer_region(reply) == " " * BOX_PREFIX + "\\boxed{2}"
    close = "\\boxed{9}" * 10  # ten boxes in a row: the last six are read
    assert answer_region(close).count(BOXED) == MAX_BOXES


@pytest.mark.parametrize(
    "reply",
    [reply for _, reply, _ in DEGENERATE]
    + ["\\[\\boxed{a}" * 9_000, "\\boxed{" * 14_000, "\\(" * 50_000, "\\boxed{1}" + "1 " * 49_000],
)
def test_a_region_is_bounded(reply: str) -> None:
    region = answer_region(reply)
    assert len(region) <= REGION_BOUND and region.count(BOXED) <= MAX_BOXES
    assert len(answer_tail(reply)) <= ANSWER_REGION_CHARS


# ---------------------------------------------------------------------- verdicts
@pytest.mark.parametrize(("name", "reply", "status"), DEGENERATE, ids=IDS)
def test_a_degenerate_reply_gets_the_verdict_of_its_region(
    name: str, reply: str, status: str
) -> None:
    verdict = grade("18", reply)
    assert verdict.graded and verdict.status == status, verdict


@pytest.mark.parametrize(("name", "reply", "status"), DEGENERATE, ids=IDS)
def test_a_degenerate_multiple_choice_reply_is_judged(name: str, reply: str, status: str) -> None:
    verdict = grade("B", reply, kind="choice", choices=CHOICES)
    assert verdict.graded and not verdict.correct, verdict


def test_the_judge_reads_only_the_region() -> None:
    # judge() in this process's main thread, math-verify's alarm on: a generous 30 s
    # per call (a region takes milliseconds; "1 " * 50000 read whole ran out of 35 s).
    from agentsgym_classical.grading.judge import judge

    for name, reply, status in DEGENERATE:
        verdict = judge(GradeRequest(gold="18", reply=reply, timeout_seconds=30))
        assert verdict.status == status, (name, verdict)


LONG_BUT_NORMAL = [
    # (gold, reply): correct answers in long replies, in the forms the envs ask for
    ("18", "Let me think. " * 6_000 + "The total is \\boxed{18}."),
    ("18", "We find \\boxed{18}. " + "Checking again, 3 * 6 = 18 indeed. " * 2_500),
    ("18", "3 * 6 = 18. " * 8_000 + "\n#### 18"),
    ("72", "#### 72\n" + "Double-checking: 48 + 24. " * 3_000),
    ("\\frac{3}{4}", "1 " * 40_000 + "so the probability is $\\boxed{\\frac{3}{4}}$"),
    ("18", "x" * 90_000 + "\nSo she has 18 apples left."),
]


@pytest.mark.parametrize(("gold", "reply"), LONG_BUT_NORMAL)
def test_correct_answers_in_long_replies_stay_correct(gold: str, reply: str) -> None:
    assert len(reply) <= 100_000
    verdict = grade(gold, reply)
    assert verdict.status == "correct", verdict


@pytest.mark.parametrize(
    "reply",
    [
        "Thinking. " * 9_000 + "The answer is \\boxed{B}.",
        "So it is \\boxed{B}. " + "Let me recheck the options. " * 3_000,
        "1 " * 45_000 + "\n#### B",
        "x" * 90_000 + " The answer is (B).",
    ],
)
def test_choice_letters_in_long_replies_stay_correct(reply: str) -> None:
    verdict = grade("B", reply, kind="choice", choices=CHOICES)
    assert verdict.status == "correct", verdict


# ---------------------------------------------------------------------- the env
def test_degenerate_replies_are_scored_and_never_fail_the_episode() -> None:
    config = {
        "max_steps_per_episode": len(DEGENERATE),
        "wrong_reward": -3.0,
        "unparsed_reward": -7.0,
        "attempt_penalty": 0.0,
    }
    env = agentsgym.make(ARITHMETIC, env_config=config)
    batch = env.run_trial([TASK], ScriptedAgent([reply for _, reply, _ in DEGENERATE]), 1)
    assert not batch.failed, [e.error for e in batch.failed]
    (episode,) = batch.episodes
    assert [s.info["status"] for s in episode.steps] == [status for *_, status in DEGENERATE]
    assert [s.reward for s in episode.steps] == [
        -3.0 if status == "wrong" else -7.0 for *_, status in DEGENERATE
    ]
    assert all(s.info["graded"] for s in episode.steps)


def test_degenerate_multiple_choice_replies_never_fail_the_episode() -> None:
    env = agentsgym.make(CHOICE, env_config={"max_steps_per_episode": 4})
    task = env.get_eval_dataset()[0]["task_data"]
    replies = ["1 " * 50_000, "[50]" * 25_000, "x" * 100_000, "\\[\\boxed{a}" * 9_000]
    batch = env.run_trial([task], ScriptedAgent(replies), 1)
    assert not batch.failed, [e.error for e in batch.failed]
    (episode,) = batch.episodes
    assert len(episode.steps) == 4 and not any(s.info["correct"] for s in episode.steps)


def test_a_busy_machine_still_fails_the_episode_of_a_degenerate_reply(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The region bounds what a reply costs; it does not turn a grader that timed out
    # (here a fake one, timing out every try) into a score.
    class TimingOut:
        calls = 0

        def grade(self, request: GradeRequest, timeout: float) -> Verdict:
            TimingOut.calls += 1
            return Verdict(status="timeout", detail="slow machine", seconds=timeout)

    monkeypatch.setattr(grading, "get_pool", TimingOut)
    env = agentsgym.make(ARITHMETIC, env_config={"unparsed_reward": -7.0})
    batch = env.run_trial([TASK], ScriptedAgent(["1 " * 50_000]), 1)
    (failed,) = batch.failed
    assert (failed.error or "").startswith("GradingError: attempt 1 at problem 't/0'")
    assert TimingOut.calls == 3 and not batch.episodes
