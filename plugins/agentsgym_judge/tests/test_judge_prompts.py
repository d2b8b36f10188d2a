"""Templates fill their fields or say which one is missing; parsers read a score or
refuse the reply (never a made-up 0)."""

from __future__ import annotations

import pytest

from agentsgym_judge import (
    CORRECTNESS_TEMPLATE,
    SCORE_TEMPLATE,
    JudgeTemplateError,
    PromptTemplate,
    number,
    yes_no,
)


def test_the_default_templates_ask_about_question_reference_and_answer() -> None:
    for text in (CORRECTNESS_TEMPLATE, SCORE_TEMPLATE):
        assert PromptTemplate(text).fields == {"question", "reference", "answer"}


def test_a_template_renders_its_fields_and_ignores_extra_values() -> None:
    template = PromptTemplate("Is {answer} right? {{literal}}", system="You judge {topic}.")
    messages = template.render({"answer": "12", "topic": "sums", "unused": 1})
    assert messages == [
        {"role": "system", "content": "You judge sums."},
        {"role": "user", "content": "Is 12 right? {literal}"},
    ]


def test_a_missing_field_is_named_with_what_to_pass() -> None:
    template = PromptTemplate(CORRECTNESS_TEMPLATE)
    with pytest.raises(JudgeTemplateError, match=r"needs 'reference'.*pass reference=\.\.\."):
        template.render({"question": "q", "answer": "a"})


@pytest.mark.parametrize(
    ("text", "what"),
    [("Is {0} right?", "plain names"), ("{answer.text}", "plain names"), ("{answer", "braces")],
)
def test_a_template_that_cannot_be_filled_is_refused_when_made(text: str, what: str) -> None:
    with pytest.raises(JudgeTemplateError, match=what):
        PromptTemplate(text)


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ("yes", 1.0),
        ("No.", 0.0),
        ("YES, the response is right", 1.0),
        ("The response is wrong, so no. (Not yes.)", 0.0),
        ("Answer: yes", 1.0),
    ],
)
def test_yes_no_reads_the_first_yes_or_no(reply: str, score: float) -> None:
    assert yes_no(reply) == score


@pytest.mark.parametrize("reply", ["", "maybe", "nothing to say", "yesterday, nobody knew"])
def test_yes_no_refuses_a_reply_without_either_word(reply: str) -> None:
    with pytest.raises(ValueError, match="neither yes nor no"):
        yes_no(reply)


def test_number_scales_the_first_number_of_its_range() -> None:
    out_of_ten = number(0, 10)
    assert out_of_ten("7") == pytest.approx(0.7)
    assert out_of_ten("Score: 10/10") == 1.0
    assert number(1, 5, scale=False)("I give it 4.5") == 4.5
    assert out_of_ten.__name__ == "number(0, 10)"


@pytest.mark.parametrize(("reply", "why"), [("great", "no number"), ("11", "outside")])
def test_number_refuses_a_missing_or_out_of_range_number(reply: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        number(0, 10)(reply)


def test_number_needs_a_range() -> None:
    with pytest.raises(ValueError, match="high > low"):
        number(5, 5)
