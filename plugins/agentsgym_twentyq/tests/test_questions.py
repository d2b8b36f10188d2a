"""The rules gamemaster: every question kind it documents, with a Yes and a No case."""

from __future__ import annotations

import pytest

from agentsgym_twentyq.gamemaster import DONT_KNOW, NO, YES, RulesGamemaster
from agentsgym_twentyq.questions import parse_question
from agentsgym_twentyq.words import Secret

GM = RulesGamemaster()
YOYO = Secret("yo-yo", "thing")
PRESENTER = Secret("TV presenter", "person")
LIBRARY = Secret("library", "place")


def ask(question: str, secret: Secret) -> str:
    return GM.answer(question, secret, []).answer


# (question, secret, expected answer, kind)
CASES = [
    # category
    ("Is it a thing?", YOYO, YES, "category"),
    ("Is it a place?", YOYO, NO, "category"),
    ("Is it a person?", PRESENTER, YES, "category"),
    ("Is it an object?", PRESENTER, NO, "category"),
    ("Is it related to places?", LIBRARY, YES, "category"),
    ("Is the category people?", LIBRARY, NO, "category"),
    ("Does it belong to the category things?", YOYO, YES, "category"),
    ("Is it a location?", LIBRARY, YES, "category"),
    ("Is it a job?", LIBRARY, NO, "category"),
    # first and last letter
    ("Does it start with 'y'?", YOYO, YES, "first_letter"),
    ("Does it begin with the letter B?", YOYO, NO, "first_letter"),
    ("Does it start with a vowel?", YOYO, NO, "first_letter"),
    ("Is the first letter a consonant?", YOYO, YES, "first_letter"),
    ("Is the first letter 't'?", PRESENTER, YES, "first_letter"),
    ("Does the word start with 'lib'?", LIBRARY, YES, "first_letter"),
    ("Is the first letter before 'm' in the alphabet?", LIBRARY, YES, "first_letter"),
    ("Is the first letter between n and z?", LIBRARY, NO, "first_letter"),
    ("Does it end in o?", YOYO, YES, "last_letter"),
    ("Does it end with the letter 'y'?", PRESENTER, NO, "last_letter"),
    ("Is the last letter a vowel?", LIBRARY, NO, "last_letter"),
    ("Does it end with 'ary'?", LIBRARY, YES, "last_letter"),
    # length (letters without spaces/hyphens; characters count everything)
    ("Does it have 4 letters?", YOYO, YES, "length"),
    ("Does it have 5 letters?", YOYO, NO, "length"),
    ("Does it have 5 characters?", YOYO, YES, "length"),
    ("Is it more than 10 letters long?", PRESENTER, YES, "length"),
    ("Is it longer than 7 letters?", LIBRARY, NO, "length"),
    ("Is it shorter than 8 letters?", LIBRARY, YES, "length"),
    ("Does it have at most 6 letters?", LIBRARY, NO, "length"),
    ("Is it a seven-letter word?", LIBRARY, YES, "length"),
    ("Is the length greater than 11?", PRESENTER, NO, "length"),
    ("Does it have 7 or more letters?", LIBRARY, YES, "length"),
    # number of words (a hyphenated word is one word)
    ("Is it one word?", YOYO, YES, "word_count"),
    ("Is it a single word?", PRESENTER, NO, "word_count"),
    ("Is it two words?", PRESENTER, YES, "word_count"),
    ("Does it have more than one word?", LIBRARY, NO, "word_count"),
    ("Is it a two-word phrase?", PRESENTER, YES, "word_count"),
    ("Is it a compound word?", YOYO, NO, "word_count"),
    ("Does it contain a hyphen?", YOYO, YES, "word_count"),
    ("Does it contain a space?", YOYO, NO, "word_count"),
    # whether a letter (or a quoted string) occurs
    ("Does it contain the letter 'o'?", YOYO, YES, "contains"),
    ("Does it have an e?", YOYO, NO, "contains"),
    ("Is there a 'v' in it?", PRESENTER, YES, "contains"),
    ("Does the letter q appear in the word?", LIBRARY, NO, "contains"),
    ("Does it contain the letters 'pres'?", PRESENTER, YES, "contains"),
    ("Does it contain 'ph'?", LIBRARY, NO, "contains"),
    ("Does it have a double letter?", LIBRARY, NO, "contains"),
    ("Does it have a double letter?", Secret("apple", "thing"), YES, "contains"),
    # alphabetical position
    ("Does it come before 'm'?", LIBRARY, YES, "alphabetical"),
    ("Does it come before 'm'?", YOYO, NO, "alphabetical"),
    ("Does it come after 'judge' alphabetically?", LIBRARY, YES, "alphabetical"),
    ("Is it alphabetically before 'lib'?", LIBRARY, NO, "alphabetical"),
    ("Is it between 'a' and 'f' in the alphabet?", LIBRARY, NO, "alphabetical"),
    ("Is it between 'k' and 'm'?", LIBRARY, YES, "alphabetical"),
    # identity, quoted only
    ("Is it 'yo yo'?", YOYO, YES, "identity"),
    ("Is the word 'library'?", YOYO, NO, "identity"),
]


@pytest.mark.parametrize(("question", "secret", "expected", "kind"), CASES)
def test_rules_answer(question: str, secret: Secret, expected: str, kind: str) -> None:
    reply = GM.answer(question, secret, [])
    assert (reply.answer, reply.kind) == (expected, kind)
    assert not reply.fallback


def test_every_documented_kind_has_a_yes_and_a_no() -> None:
    seen = {(kind, expected) for _, _, expected, kind in CASES}
    kinds = {kind for _, _, _, kind in CASES}
    assert kinds == {
        "category",
        "first_letter",
        "last_letter",
        "length",
        "word_count",
        "contains",
        "alphabetical",
        "identity",
    }
    assert all((kind, YES) in seen and (kind, NO) in seen for kind in kinds)


@pytest.mark.parametrize(
    "question",
    [
        "Is it a living thing?",  # "thing" is its category, but this asks something else
        "Is it a place or a thing?",
        "Is it a tool?",
        "Doesn't it start with y?",  # negated: never answer the opposite
        "Does it contain water?",
        "Is it before lunch?",
        "Is it bigger than a breadbox?",
        "",
        "????",
        "[yo-yo]",
    ],
)
def test_undecidable_questions_get_i_dont_know(question: str) -> None:
    assert ask(question, YOYO) == DONT_KNOW
    assert parse_question(question) is None


def test_category_of_an_unknown_word_is_not_guessed() -> None:
    mystery = Secret("gizmo", None)
    assert ask("Is it a thing?", mystery) == DONT_KNOW
    assert ask("Does it start with 'g'?", mystery) == YES


def test_phrasing_variants_are_normalised() -> None:
    # Case, curly quotes, a preamble before the question, filler words, numbering.
    assert ask("Hmm. OK, so DOES IT START WITH \u2018Y\u2019?", YOYO) == YES
    assert ask("3. Does your word contain the letter \u201co\u201d?", YOYO) == YES
    assert ask("<think>is it [apple]?</think>Is the secret word a thing", YOYO) == YES
