"""TextArena's TwentyQuestions word lists, with the category of every word.

The words and their categories come from TextArena itself, so the env plays the same
game: ``textarena/envs/TwentyQuestions/twenty_questions_words.json`` holds two lists,
``basic`` and ``hardcore``, each split into the themes ``places``, ``people`` and
``things``. TextArena tells the player that theme ("This object is related to
places"), and the rules gamemaster answers category questions from it. Nothing is
copied into this package: the lists are read from the installed ``textarena``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Literal

Level = Literal["basic", "hardcore"]
Category = Literal["place", "person", "thing"]

LEVELS: tuple[Level, ...] = ("basic", "hardcore")
WORDS_PACKAGE = "textarena.envs.TwentyQuestions"
WORDS_FILE = "twenty_questions_words.json"

# TextArena's theme keys and the category names the gamemaster and prompts use.
THEME_TO_CATEGORY: dict[str, Category] = {"places": "place", "people": "person", "things": "thing"}
CATEGORY_TO_THEME: dict[Category, str] = {v: k for k, v in THEME_TO_CATEGORY.items()}


@dataclass(frozen=True)
class Secret:
    """The hidden word of one episode and its category (``None`` when unknown)."""

    word: str
    category: Category | None = None

    @property
    def theme(self) -> str | None:
        """TextArena's name for the category (``"places"``), as the prompt shows it."""
        return CATEGORY_TO_THEME[self.category] if self.category else None


def level_of(hardcore: bool) -> Level:
    return "hardcore" if hardcore else "basic"


@lru_cache(maxsize=1)
def _raw_lists() -> dict[str, dict[str, list[str]]]:
    with resources.files(WORDS_PACKAGE).joinpath(WORDS_FILE).open("r", encoding="utf-8") as file:
        data = json.load(file)
    for level in LEVELS:
        themes = data.get(level)
        if not isinstance(themes, dict) or set(themes) != set(THEME_TO_CATEGORY):
            raise RuntimeError(
                f"textarena's {WORDS_FILE} has an unexpected {level!r} section; this plugin "
                f"expects the themes {sorted(THEME_TO_CATEGORY)} (textarena 0.7.x)"
            )
    return data


@lru_cache(maxsize=2)
def word_list(level: Level) -> tuple[Secret, ...]:
    """Every word of a list once, in TextArena's order (its lists repeat a few words)."""
    seen: set[str] = set()
    secrets: list[Secret] = []
    for theme, words in _raw_lists()[level].items():
        for word in words:
            if word not in seen:
                seen.add(word)
                secrets.append(Secret(word, THEME_TO_CATEGORY[theme]))
    return tuple(secrets)


def lookup_category(word: str, prefer: Level = "basic") -> Category | None:
    """The category TextArena gives ``word`` (preferred list first), else ``None``."""
    key = word.strip().lower()
    for level in (prefer, *(lvl for lvl in LEVELS if lvl != prefer)):
        for secret in word_list(level):
            if secret.word.lower() == key:
                return secret.category
    return None
