"""ReferenceQuestioner: a scripted player that wins against the rules gamemaster.

It keeps the words of TextArena's list that fit every answer so far and asks the
question that splits them best: a natural one (a letter it contains, its first or
last letter, its length, its number of words) when that splits the candidates
nearly in half, otherwise "Does it come before '<median word>' alphabetically?",
which always halves them. With the theme named in the rules that finds any word of
either list in at most 8 questions, well inside the limit.

It is stateless: every call re-reads the conversation (the rules for the list,
theme and turn limit, then each of its questions with the answer after it), so it
plays any number of episodes concurrently and deterministically. Answers it cannot
use ("I don't know", or one that no candidate fits, as a model gamemaster may give)
are skipped; it guesses when one candidate is left or on its last turn.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from agentsgym_twentyq.gamemaster import NO, YES
from agentsgym_twentyq.parsing import extract_question
from agentsgym_twentyq.questions import parse_question
from agentsgym_twentyq.words import LEVELS, THEME_TO_CATEGORY, Level, Secret, word_list

ANSWER_LINE = re.compile(r"^Gamemaster: (Yes|No|I don't know)\b", re.MULTILINE)
LEVEL_LINE = re.compile(r"playing 20 Questions \((Basic|Hardcore)\)", re.IGNORECASE)
THEME_LINE = re.compile(r"related to (places|people|things)\b")
TURN_LINE = re.compile(r"Turn (\d+) of (\d+)")


class ReferenceQuestioner:
    """Plays TwentyQuestions by splitting the remaining candidate words.

    :param natural_split: ask a natural question instead of the alphabetical one
        when its smaller side holds at least this share of the candidates (0.5 would
        only ever ask perfectly balanced natural questions; 1.0 never asks them).
    :param level: ``"basic"`` or ``"hardcore"`` to fix the word list instead of
        reading it from the rules.
    """

    def __init__(self, natural_split: float = 0.4, level: Level | None = None) -> None:
        if not 0.0 <= natural_split <= 1.0:
            raise ValueError(f"natural_split must be within [0, 1], got {natural_split}")
        if level is not None and level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
        self.natural_split = natural_split
        self.level = level

    def get_action(self, messages: Sequence[dict[str, str]], agent_state: Any) -> tuple[str, Any]:
        candidates = self.candidates(messages)
        asked = {
            extract_question(m.get("content", "")) for m in messages if m.get("role") == "assistant"
        }
        if len(candidates) > 1 and turns_left(messages) > 1:
            question = self.best_question(candidates, asked)
            if question is not None:
                return question, agent_state
        return f"My guess is [{_first(candidates).word}].", agent_state

    # ------------------------------------------------------------------ beliefs
    def candidates(self, messages: Sequence[dict[str, str]]) -> list[Secret]:
        """The words that fit the rules and every usable answer so far."""
        rules = next((m.get("content", "") for m in messages if m.get("role") == "user"), "")
        level_match = LEVEL_LINE.search(rules)
        levels: Sequence[Level] = (
            (self.level,)
            if self.level
            else ((level_match.group(1).lower(),) if level_match else LEVELS)  # type: ignore[assignment]
        )
        words = list({s.word: s for lvl in levels for s in word_list(lvl)}.values())
        theme = THEME_LINE.search(rules)
        if theme:
            words = [s for s in words if s.category == THEME_TO_CATEGORY[theme.group(1)]] or words
        for question, answer in exchanges(messages):
            if answer not in (YES, NO):
                continue
            query = parse_question(question)
            if query is None:
                continue
            kept = [s for s in words if query.evaluate(s) == (answer == YES)]
            if kept:  # an answer no candidate fits is the gamemaster's mistake: skip it
                words = kept
        return words

    # ------------------------------------------------------------------ choice
    def best_question(self, candidates: Sequence[Secret], asked: set[str]) -> str | None:
        """The most even split; a natural question when it is even enough."""
        n = len(candidates)
        natural = [(q, k) for q, k in natural_questions(candidates) if q not in asked and 0 < k < n]
        if natural:
            question, yes = max(natural, key=lambda item: min(item[1], n - item[1]))
            if min(yes, n - yes) >= self.natural_split * n:
                return question
        question = alphabetical_question(candidates)
        if question is not None and question not in asked:
            return question
        if natural:
            return max(natural, key=lambda item: min(item[1], n - item[1]))[0]
        return None


def exchanges(messages: Sequence[dict[str, str]]) -> list[tuple[str, str]]:
    """(question, answer) for every player turn followed by a gamemaster answer."""
    pairs = []
    for message, reply in pairwise(messages):
        if message.get("role") == "assistant" and reply.get("role") == "user":
            answer = ANSWER_LINE.search(reply.get("content", ""))
            if answer:
                pairs.append((extract_question(message.get("content", "")), answer.group(1)))
    return pairs


def turns_left(messages: Sequence[dict[str, str]]) -> int:
    """Turns left including this one, from the latest "Turn k of N" line."""
    for message in reversed(messages):
        if message.get("role") == "user":
            found = TURN_LINE.findall(message.get("content", ""))
            if found:
                turn, total = map(int, found[-1])
                return total - turn + 1
    return 2  # no count shown: assume there is room to ask


def _quote(text: str) -> str:
    return f'"{text}"' if "'" in text else f"'{text}'"


def _letters(word: str) -> str:
    return "".join(c for c in word.lower() if c.isalpha())


def natural_questions(candidates: Sequence[Secret]) -> list[tuple[str, int]]:
    """Natural questions with how many candidates each would get a Yes from."""
    contains: Counter[str] = Counter()
    first: Counter[str] = Counter()
    last: Counter[str] = Counter()
    lengths: Counter[int] = Counter()
    multiword = 0
    for secret in candidates:
        letters = _letters(secret.word)
        contains.update(set(letters))
        first[letters[:1]] += 1
        last[letters[-1:]] += 1
        lengths[len(letters)] += 1
        multiword += len(secret.word.split()) > 1
    questions: list[tuple[str, int]] = []
    questions += [(f"Does it contain the letter '{c}'?", k) for c, k in sorted(contains.items())]
    questions += [
        (f"Does it start with the letter '{c}'?", k) for c, k in sorted(first.items()) if c
    ]
    questions += [(f"Does it end with the letter '{c}'?", k) for c, k in sorted(last.items()) if c]
    longer = len(candidates)
    for size in sorted(lengths):
        longer -= lengths[size]
        questions.append((f"Does it have more than {size} letters?", longer))
    questions.append(("Does it have more than one word?", multiword))
    return questions


def alphabetical_question(candidates: Sequence[Secret]) -> str | None:
    """ "Does it come before '<median>' alphabetically?", halving distinct words."""
    words = sorted({s.word.lower() for s in candidates})
    if len(words) < 2:
        return None
    return f"Does it come before {_quote(words[len(words) // 2])} alphabetically?"


def _first(candidates: Sequence[Secret]) -> Secret:
    return min(candidates, key=lambda s: s.word.lower())
