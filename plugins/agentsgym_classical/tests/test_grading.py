"""Answer checking: right and wrong answers of every kind, through math-verify."""

from __future__ import annotations

import pytest

from agentsgym_classical.grading import grade
from agentsgym_classical.grading.normalize import chosen_letter, hash_answer

MATH_CASES = [
    # (kind of answer, gold, reply, correct?)
    ("boxed", "18", "Adding up, the total is \\boxed{18}.", True),
    ("boxed", "18", "Adding up, the total is \\boxed{19}.", False),
    ("hash", "72", "48 + 24 = 72\n#### 72", True),
    ("hash", "72", "48 + 24 = 73\n#### 73", False),
    ("hash, thousands", "1234", "The sum is\n#### 1,234", True),
    ("hash, then chatter", "18", "#### 18\nI hope that helps, 2 of us checked.", True),
    ("hash, with units", "18", "She pays 18 dollars.\n#### 18 dollars", True),
    ("hash, latex", "\\frac{3}{4}", "#### \\frac{3}{4}", True),
    ("final number", "18", "So she has 18 apples left.", True),
    ("final number", "18", "So she has 17 apples left.", False),
    ("decimal", "18", "The answer is 18.00", True),
    ("fraction", "\\frac{3}{4}", "The probability is 3/4.", True),
    ("fraction as decimal", "\\frac{3}{4}", "The probability is 0.75", True),
    ("fraction", "\\frac{3}{4}", "The probability is \\boxed{\\frac{2}{3}}", False),
    ("latex", "\\frac{\\sqrt{3}}{2}", "$\\sin 60^\\circ = \\boxed{\\dfrac{\\sqrt3}{2}}$", True),
    ("latex", "\\frac{\\sqrt{3}}{2}", "\\boxed{\\frac{\\sqrt{2}}{2}}", False),
    ("latex expression", "3\\pi", "The area is \\boxed{3\\pi}.", True),
    ("percentage", "20", "The discount is 20%.", True),
    ("percentage", "20", "The discount is \\boxed{25\\%}.", False),
    ("negative", "-\\frac{1}{2}", "\\boxed{-0.5}", True),
    ("aime leading zero", "24", "\\boxed{024}", True),
]


@pytest.mark.parametrize(
    ("kind", "gold", "reply", "correct"),
    MATH_CASES,
    ids=[f"{c[0]}-{'right' if c[3] else 'wrong'}-{i}" for i, c in enumerate(MATH_CASES)],
)
def test_math_answers(kind: str, gold: str, reply: str, correct: bool) -> None:
    verdict = grade(gold, reply)
    assert verdict.status == ("correct" if correct else "wrong"), verdict
    assert verdict.answer is not None


def test_no_answer_is_unparsed() -> None:
    verdict = grade("18", "I am not sure how to do this.")
    assert verdict.status == "unparsed" and not verdict.correct and verdict.answer is None


def test_equal_answers_share_one_canonical_form() -> None:
    # cons@k votes on the canonical answer, so spellings of one value must agree.
    forms = ["\\boxed{\\frac{3}{4}}", "0.75", "#### 3/4"]
    assert {grade("\\frac{3}{4}", reply).answer for reply in forms} == {"3/4"}
    assert {grade("18", reply).answer for reply in ["\\boxed{18}", "18.00", "#### 18"]} == {"18"}


CHOICES = {"A": "30", "B": "40", "C": "45", "D": "50", "E": "90"}
CHOICE_CASES = [
    ("\\boxed{B}", "B"),
    ("A quick check of each option. So \\boxed{(B)}", "B"),
    ("The answer is (B).", "B"),
    ("Answer: B", "B"),
    ("**B**", "B"),
    ("#### B", "B"),
    ("60 / 1.5 = 40, so the speed is 40", "B"),  # by value: exactly one option is 40
    ("\\boxed{D}", "D"),
    ("I think the answer is (A).", "A"),
]


@pytest.mark.parametrize(("reply", "letter"), CHOICE_CASES)
def test_choice_letters(reply: str, letter: str) -> None:
    verdict = grade("B", reply, kind="choice", choices=CHOICES)
    assert verdict.answer == letter
    assert verdict.correct is (letter == "B")


def test_choice_without_a_letter_is_unparsed() -> None:
    assert grade("B", "no idea", kind="choice", choices=CHOICES).status == "unparsed"


def test_normalizers() -> None:
    assert hash_answer("work\n#### $1,234.") == "1234"
    assert hash_answer("no marker") is None
    assert chosen_letter("A is tempting but \\boxed{\\text{C}}", "ABCDE") == "C"
    assert chosen_letter("Options (A) and (D) fail; C) works", "ABCDE") == "C"
    assert chosen_letter("plain text", "ABCDE") is None
