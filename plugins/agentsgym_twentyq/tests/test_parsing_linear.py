"""The question parser is linear in the reply and finds what the regex it replaced found."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from agentsgym_twentyq.parsing import extract_question, question_sentences

# The parser of before: right, but it tries every start of a long run without "?"
QUADRATIC = re.compile(r"[^.!?\n]*\?")


@settings(max_examples=300, deadline=None, database=None)
@given(st.text(alphabet=st.sampled_from(list("ab .!?\n\t'")), max_size=60))
def test_question_sentences_are_the_regex_findall(text: str) -> None:
    assert question_sentences(text) == QUADRATIC.findall(text)


def test_a_megabyte_reply_is_judged() -> None:
    # The regex needed minutes for 200 kB without a "?"; this is one pass (pytest's
    # timeout catches a return of the quadratic scan as a hang).
    reply = "I think " + "a" * 1_000_000
    assert extract_question(reply) == reply.strip()[:500]
    assert extract_question(reply + ". Is it a cat?") == "Is it a cat?"
