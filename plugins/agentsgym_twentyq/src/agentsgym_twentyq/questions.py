"""The questions the rules gamemaster understands, parsed into decidable queries.

A question is understood only when the *whole* question matches one of the forms
below; anything else (``"Is it a living thing?"``, ``"Is it a place or a thing?"``,
``"Doesn't it start with a?"``) is not, and the gamemaster says "I don't know". That
strictness is the point: a loose keyword match would answer "Is it a living thing?"
with "Yes" for ``car`` because "thing" is its category.

Kinds (``it`` may also be "the word", "the answer", "your word", "the object", ...):

* ``category``: "Is it a place / person / thing?" (also location, people, human,
  someone, profession, occupation, job, object, item), "Is it related to places?",
  "Is the category people?", "Does it belong to the category things?".
* ``first_letter`` / ``last_letter``: "Does it start with 'a'?", "Does it begin with
  the letter b?", "Does it end in y?", "Is the first letter 'c'?", "Is the last
  letter a vowel?", "Does it start with a consonant?", "Does it start with 'ch'?"
  (a quoted prefix or suffix), "Is the first letter before 'm' in the alphabet?",
  "Is the first letter between a and f?" (inclusive).
* ``length``: "Does it have 5 letters?", "Is it more than 6 letters long?", "Is it
  longer than 7 letters?", "Does it have at most 8 letters?", "Is it a five-letter
  word?", "Is the length greater than 9?", "Does it have 6 or more letters?".
  Letters are counted without spaces, hyphens and apostrophes; "characters" counts
  every character.
* ``word_count``: "Is it one word?", "Is it a single word?", "Is it two words?",
  "Does it have more than one word?", "Is it a two-word phrase?", "Is it a compound
  word?", "Does it contain a space / a hyphen?". A hyphenated word (``yo-yo``) is
  one word.
* ``contains``: "Does it contain the letter 'e'?", "Does it have an e?", "Is there a
  'z' in it?", "Does the letter q appear in the word?", "Does it contain 'ph'?"
  (a quoted string), "Does it have a double letter?".
* ``alphabetical``: "Does it come before 'm'?", "Does it come after 'judge'
  alphabetically?", "Is it alphabetically before 'lion'?", "Is it between 'a' and
  'f' in the alphabet?". Plain string order of the lower-cased word: ``moon`` comes
  after ``m``, and between is strict.
* ``identity``: "Is it 'apple'?", "Is the word 'yo yo'?" (quoted only: an unquoted
  "Is it a tool?" is a category-like question it cannot decide).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

from agentsgym_twentyq.parsing import extract_question, normalize_word
from agentsgym_twentyq.words import Category, Secret

Predicate = Callable[[Secret], "bool | None"]


@dataclass(frozen=True)
class Query:
    """A question the rules gamemaster can decide.

    ``evaluate`` returns ``None`` when the secret lacks what the question needs (a
    category question about a custom word whose category is unknown).
    """

    kind: str
    description: str
    predicate: Predicate

    def evaluate(self, secret: Secret) -> bool | None:
        return self.predicate(secret)


# ------------------------------------------------------------------ vocabulary
CATEGORY_WORDS: dict[str, Category] = {
    **dict.fromkeys(["place", "places", "location", "locations"], "place"),
    **dict.fromkeys(
        [
            "person",
            "people",
            "human",
            "humans",
            "human being",
            "someone",
            "somebody",
            "profession",
            "occupation",
            "job",
        ],
        "person",
    ),
    **dict.fromkeys(["thing", "things", "object", "objects", "item", "items"], "thing"),
}
NUMBER_WORDS = {
    "single": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
}
COMPARATORS = {
    "": "==",
    "exactly": "==",
    "precisely": "==",
    "more than": ">",
    "greater than": ">",
    "over": ">",
    "above": ">",
    "fewer than": "<",
    "less than": "<",
    "under": "<",
    "below": "<",
    "at least": ">=",
    "no fewer than": ">=",
    "no less than": ">=",
    "at most": "<=",
    "no more than": "<=",
    "not more than": "<=",
    "up to": "<=",
}
COMPARE: dict[str, Callable[[int, int], bool]] = {
    "==": int.__eq__,
    ">": int.__gt__,
    "<": int.__lt__,
    ">=": int.__ge__,
    "<=": int.__le__,
}
VOWELS = frozenset("aeiou")

SUBJ = (
    r"(?:it|this|that|the (?:secret |target |hidden |mystery |chosen )?"
    r"(?:word|answer|object|thing|term|phrase|solution|item|name)"
    r"|your (?:secret |chosen )?(?:word|answer|object|thing|phrase|term))"
)
QUOTED = r"""(?:'[^']+'|"[^"]+")"""
TOKEN = rf"(?:{QUOTED}|[a-z]+)"
TARGET = rf"(?:(?:the letters?|letters?|the character|an?|the) )?(?P<t>{TOKEN})"
NUM = rf"(?P<n>\d{{1,2}}|{'|'.join(NUMBER_WORDS)})"
CMP = rf"(?:(?P<cmp>{'|'.join(sorted((c for c in COMPARATORS if c), key=len, reverse=True))}) )?"
OR_MORE = r"(?: or (?P<orx>more|fewer|less))?"
UNIT = r"(?P<unit>letters?|characters?|chars?|words?)"
ALPHA = (
    r"(?P<alpha> alphabetically| lexicographically| in (?:the )?alphabet| in (?:the )?"
    r"alphabetical order| in (?:the |a )?dictionary)"
)
REL = r"(?P<rel>before|after|earlier than|later than)"


def _unquote(token: str) -> tuple[str, bool]:
    if len(token) >= 2 and token[0] == token[-1] and token[0] in "'\"":
        return token[1:-1].strip(), True
    return token, False


def _letters(word: str) -> str:
    return "".join(c for c in word.lower() if c.isalpha())


def _count(secret: Secret, unit: str) -> int:
    if unit.startswith("word"):
        return len(secret.word.split())
    if unit.startswith("letter"):
        return len(_letters(secret.word))
    return len(secret.word)


def _number(raw: str) -> int:
    return int(raw) if raw.isdigit() else NUMBER_WORDS[raw]


# ------------------------------------------------------------------ builders
Rule = tuple["re.Pattern[str]", Callable[["re.Match[str]"], "Query | None"]]
RULES: list[Rule] = []


def rule(*patterns: str) -> Callable[[Callable[[re.Match[str]], Query | None]], Callable]:
    """Register a builder for questions that fully match one of ``patterns``."""

    def decorate(build: Callable[[re.Match[str]], Query | None]) -> Callable:
        for pattern in patterns:
            RULES.append((re.compile(pattern), build))
        return build

    return decorate


@rule(
    rf"(?:is|are) {SUBJ} (?:a |an |some )?(?:kind of |type of |sort of )?"
    r"(?P<cat>[a-z]+(?: being)?)",
    rf"(?:is|are) {SUBJ} (?:related to|from|in|part of|about) (?:the )?"
    r"(?:(?:category|theme|topic|group) (?:of )?)?['\"]?(?P<cat>[a-z]+)['\"]?"
    r"(?: category| theme)?",
    rf"is the (?:category|theme|topic)(?: of {SUBJ})? ['\"]?(?:a |an )?(?P<cat>[a-z]+)['\"]?",
    rf"(?:does|do) {SUBJ} belong (?:to|in) (?:the )?(?:(?:category|theme) )?"
    r"['\"]?(?P<cat>[a-z]+)['\"]?(?: category| theme)?",
)
def _category(m: re.Match[str]) -> Query | None:
    category = CATEGORY_WORDS.get(m.group("cat"))
    if category is None:
        return None

    def test(secret: Secret) -> bool | None:
        return None if secret.category is None else secret.category == category

    return Query("category", f"category is {category}", test)


def _edge_query(position: str, raw: str) -> Query | None:
    """First/last letter: a letter, a vowel/consonant, or a quoted prefix/suffix."""
    value, quoted = _unquote(raw)
    first = position in ("start", "begin", "first", "starting", "initial")
    kind = "first_letter" if first else "last_letter"
    where = "starts" if first else "ends"

    def edge(secret: Secret) -> str:
        letters = _letters(secret.word)
        return (letters[:1] if first else letters[-1:]) or ""

    if not quoted and value in ("vowel", "vowels", "consonant", "consonants"):
        vowel = value.startswith("vowel")
        return Query(
            kind,
            f"{where} with a {'vowel' if vowel else 'consonant'}",
            lambda s: (edge(s) in VOWELS) == vowel and edge(s) != "",
        )
    if len(value) == 1 and value.isalpha():
        return Query(kind, f"{where} with {value!r}", lambda s: edge(s) == value)
    if quoted and value:
        text = value.lower()
        if first:
            return Query(kind, f"starts with {text!r}", lambda s: s.word.lower().startswith(text))
        return Query(kind, f"ends with {text!r}", lambda s: s.word.lower().endswith(text))
    return None


@rule(
    rf"(?:does|do) {SUBJ} (?P<pos>start|begin|end)s? (?:with|in) {TARGET}",
    rf"(?:is|are) (?:the |its )?(?P<pos>first|last|final|starting|initial|ending) "
    rf"(?:letter|character)(?: of {SUBJ})? {TARGET}",
)
def _edge(m: re.Match[str]) -> Query | None:
    return _edge_query(m.group("pos"), m.group("t"))


@rule(
    rf"(?:is|are) (?:the |its )?(?P<pos>first|last) (?:letter|character)(?: of {SUBJ})?"
    rf"(?: alphabetically)? {REL} (?:the letter )?(?P<x>{TOKEN}){ALPHA}?",
    rf"(?:is|are) (?:the |its )?(?P<pos>first|last) (?:letter|character)(?: of {SUBJ})?"
    rf" (?:between|from) (?:the letter )?(?P<x>{TOKEN}) (?:and|to) (?:the letter )?(?P<y>{TOKEN})"
    rf"(?: inclusive)?{ALPHA}?",
)
def _edge_order(m: re.Match[str]) -> Query | None:
    x = _unquote(m.group("x"))[0]
    y = _unquote(m.group("y"))[0] if "y" in m.groupdict() and m.group("y") else None
    if len(x) != 1 or (y is not None and len(y) != 1):
        return None
    first = m.group("pos") == "first"
    kind = "first_letter" if first else "last_letter"

    def edge(secret: Secret) -> str:
        letters = _letters(secret.word)
        return letters[:1] if first else letters[-1:]

    if y is not None:
        return Query(
            kind, f"{'first' if first else 'last'} letter in {x}..{y}", lambda s: x <= edge(s) <= y
        )
    before = m.group("rel") in ("before", "earlier than")
    return Query(
        kind,
        f"{'first' if first else 'last'} letter {'before' if before else 'after'} {x!r}",
        lambda s: edge(s) < x if before else edge(s) > x,
    )


def _count_query(unit: str, op: str, n: int) -> Query:
    kind = "word_count" if unit.startswith("word") else "length"
    label = (
        "words"
        if kind == "word_count"
        else ("letters" if unit.startswith("letter") else "characters")
    )
    return Query(kind, f"{label} {op} {n}", lambda s: COMPARE[op](_count(s, unit), n))


def _op(cmp: str | None, orx: str | None) -> str:
    if orx:
        return ">=" if orx == "more" else "<="
    return COMPARATORS[cmp or ""]


@rule(
    rf"(?:does|do) {SUBJ} (?:have|contain|consist of|use|include|has) {CMP}{NUM}{OR_MORE} {UNIT}"
    r"(?: in (?:it|total))?(?: long)?",
    rf"(?:is|are) {SUBJ} (?:made (?:up )?of |composed of )?(?:a |an )?{CMP}{NUM}{OR_MORE} {UNIT}"
    r"(?: long)?",
    rf"(?:is|are) {SUBJ} (?:a |an )?{NUM}[ -]{UNIT} (?:word|phrase|term|name|answer|thing|object)",
)
def _counted(m: re.Match[str]) -> Query | None:
    groups = m.groupdict()
    return _count_query(
        groups["unit"], _op(groups.get("cmp"), groups.get("orx")), _number(groups["n"])
    )


@rule(rf"(?:is|are) {SUBJ} (?P<lg>longer|shorter) than {NUM} {UNIT}")
def _longer(m: re.Match[str]) -> Query | None:
    return _count_query(
        m.group("unit"), ">" if m.group("lg") == "longer" else "<", _number(m.group("n"))
    )


@rule(
    rf"(?:is|are) the (?P<what>length|number of letters|number of characters|number of words"
    rf"|letter count|word count|character count)(?: of {SUBJ})? {CMP}{NUM}{OR_MORE}(?: {UNIT})?"
)
def _measure(m: re.Match[str]) -> Query | None:
    what = m.group("what")
    unit = "words" if "word" in what else ("characters" if "character" in what else "letters")
    if m.group("unit") and m.group("unit")[0] != unit[0]:
        return None  # "is the word count 5 letters": contradictory
    return _count_query(unit, _op(m.group("cmp"), m.group("orx")), _number(m.group("n")))


@rule(
    rf"(?:is|are) {SUBJ} (?:a |an )?(?:multi[ -]?word|multiple[ -]word|compound)"
    r"(?: word| phrase| term| name| answer)?",
)
def _multiword(m: re.Match[str]) -> Query | None:
    return _count_query("words", ">", 1)


@rule(
    rf"(?:does|do|is|are) {SUBJ} (?:have|contain|include|has|containing|including)"
    r"(?: a| an| any)? (?P<sep>spaces?|hyphens?|dash(?:es)?)(?: in it)?",
)
def _separator(m: re.Match[str]) -> Query | None:
    char = " " if m.group("sep").startswith("space") else "-"
    name = "a space" if char == " " else "a hyphen"
    return Query("word_count", f"contains {name}", lambda s: char in s.word)


def _contains_query(raw: str, explicit_letters: bool) -> Query | None:
    value, quoted = _unquote(raw)
    value = value.lower()
    if len(value) == 1 and value.isalpha():
        return Query("contains", f"contains {value!r}", lambda s: value in s.word.lower())
    if value and (quoted or explicit_letters) and all(c.isalpha() or c in " -'" for c in value):
        return Query("contains", f"contains {value!r}", lambda s: value in s.word.lower())
    return None


@rule(
    rf"(?:does|do) {SUBJ} (?:contain|have|include|use|feature|has)(?: the| a| an| any)? "
    rf"(?P<lw>letters?|characters?) (?P<t>{TOKEN})(?: in it| anywhere| in its spelling)?",
    rf"(?:does|do) {SUBJ} (?:contain|have|include|use|has) (?:an? )?(?P<t>{TOKEN})"
    r"(?: in it| anywhere| in its spelling)?",
    rf"is there (?:an? |the |any )?(?P<lw>letter |character )?(?P<t>{TOKEN}) in {SUBJ}",
    rf"(?:is|does) (?:the |an? )?(?P<lw>letter |character )?(?P<t>{TOKEN}) "
    rf"(?:in|appear in|occur in|appears in|occurs in|show up in) {SUBJ}",
)
def _contains(m: re.Match[str]) -> Query | None:
    explicit = bool(m.groupdict().get("lw")) and m.group("lw").strip().endswith("s")
    return _contains_query(m.group("t"), explicit)


@rule(
    rf"(?:does|do) {SUBJ} (?:contain|have|include|has) (?:a |an |any )?"
    r"(?:double|doubled|repeated) letters?(?: in a row)?",
)
def _double(m: re.Match[str]) -> Query | None:
    def test(secret: Secret) -> bool:
        letters = _letters(secret.word)
        return any(a == b for a, b in pairwise(letters))

    return Query("contains", "has a double letter", test)


def _order_target(raw: str) -> str | None:
    value, _ = _unquote(raw)
    value = value.lower().strip()
    return value or None


def _alphabetical(before: bool, x: str) -> Query:
    label = "before" if before else "after"
    return Query(
        "alphabetical",
        f"alphabetically {label} {x!r}",
        lambda s: s.word.lower() < x if before else s.word.lower() > x,
    )


@rule(
    rf"(?:does|do) {SUBJ} (?:come|fall|appear|go|sit|occur|rank) (?:alphabetically )?{REL} "
    rf"(?:the letter |the word )?(?P<x>{TOKEN}){ALPHA}?",
    rf"(?:is|are) {SUBJ} (?:alphabetically |lexicographically )?{REL} "
    rf"(?:the letter |the word )?(?P<x>{TOKEN}){ALPHA}?",
)
def _order(m: re.Match[str]) -> Query | None:
    x = _order_target(m.group("x"))
    if x is None:
        return None
    quoted = _unquote(m.group("x"))[1]
    # "Is it before lunch?" is not about spelling; the is-form needs quotes or an
    # explicit "alphabetically", "come before" is clear enough on its own.
    if m.group(0).startswith(("is ", "are ")) and not (
        quoted or m.group("alpha") or "alphabetically" in m.group(0) or "letter" in m.group(0)
    ):
        return None
    return _alphabetical(m.group("rel") in ("before", "earlier than"), x)


@rule(
    rf"(?:(?:does|do) {SUBJ} (?:come|fall|lie|go)|(?:is|are) {SUBJ}) (?:alphabetically )?between "
    rf"(?P<x>{TOKEN}) and (?P<y>{TOKEN}){ALPHA}?",
)
def _between(m: re.Match[str]) -> Query | None:
    x, y = _order_target(m.group("x")), _order_target(m.group("y"))
    if x is None or y is None:
        return None
    lo, hi = min(x, y), max(x, y)
    return Query(
        "alphabetical",
        f"alphabetically between {lo!r} and {hi!r}",
        lambda s: lo < s.word.lower() < hi,
    )


@rule(rf"(?:is|are) {SUBJ} (?:exactly |called |named |spelled |the word )?(?P<x>{QUOTED})")
def _identity(m: re.Match[str]) -> Query | None:
    x = _unquote(m.group("x"))[0]
    target = normalize_word(x)
    return Query("identity", f"is {x!r}", lambda s: normalize_word(s.word) == target)


# ------------------------------------------------------------------ entry point
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "`": "'"})
_FILLER = re.compile(
    r"^(?:(?:ok(?:ay)?|so|alright|all right|great|thanks|next|next question|"
    r"question(?: \d+)?|q\d*|\d+)\s*[,:.)!-]?\s+)+"
)


def normalize_question(question: str) -> str:
    """The question's last sentence in lower case, straight quotes, single spaces, no
    filler words or end punctuation."""
    text = extract_question(question.translate(_QUOTES)).lower()
    text = " ".join(text.split()).strip()
    text = text.rstrip(" ?.!")
    return _FILLER.sub("", text).strip()


def parse_question(question: str) -> Query | None:
    """The query a question asks, or ``None`` when the rules cannot decide it."""
    text = normalize_question(question)
    if not text:
        return None
    for pattern, build in RULES:
        match = pattern.fullmatch(text)
        if match is not None:
            query = build(match)
            if query is not None:
                return query
    return None
