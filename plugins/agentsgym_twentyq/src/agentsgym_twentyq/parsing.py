"""Reading the player's reply: a guess in square brackets, or else a question.

TextArena recognises a guess with ``\\[([a-zA-Z\\s]+)\\]`` and calls it right when the
secret word is a *substring* of it. That makes ``[yo-yo]`` and
``[globe-trotting trunk]`` impossible to write (no hyphen allowed) and lets
``[elephant]`` win for the word ``ant``. Here a guess is any ``[...]`` holding
letters, spaces, hyphens and apostrophes, found anywhere in the reply, compared to
the secret word as a whole after normalisation (case, apostrophe and dash variants,
hyphen versus space, a leading article). Every word of both lists can be guessed.
"""

from __future__ import annotations

import re
import unicodedata

# Reasoning models put their thoughts in <think> blocks; a guess or question in there
# is a thought, not a move. An unclosed block (truncated generation) runs to the end.
THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
BRACKETED = re.compile(r"\[([^\[\]\n]{1,100})\]")
GUESS_BODY = re.compile(r"[^\W\d_]+(?:[ '\-]+[^\W\d_]+)*'?")
SENTENCE_END = re.compile(r"[.!?\n]")

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "`": "'", "\u02bc": "'"})
_DASHES = str.maketrans({c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2212"})
_ARTICLE = re.compile(r"^(?:a|an|the)\s+(?=\S)")


def strip_thinking(text: str) -> str:
    """The reply without ``<think>...</think>`` blocks."""
    return THINK_BLOCK.sub(" ", text)


def _canonical_text(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).translate(_APOSTROPHES).translate(_DASHES)
    return " ".join(text.split())


def is_guessable(word: str) -> bool:
    """Whether a player can write ``word`` as a guess (a custom solution must be)."""
    return GUESS_BODY.fullmatch(_canonical_text(word)) is not None


def parse_guess(reply: str) -> str | None:
    """The last well-formed ``[guess]`` in the reply, or ``None`` when it asks a question.

    Brackets holding anything but letters, spaces, hyphens and apostrophes (``[42]``,
    ``[yes/no]``) are not guesses.
    """
    found = None
    for match in BRACKETED.finditer(strip_thinking(reply)):
        body = _canonical_text(match.group(1)).strip()
        if GUESS_BODY.fullmatch(body):
            found = body
    return found


def normalize_word(word: str) -> str:
    """The form guesses and solutions are compared in.

    Lower case, unicode apostrophes and dashes folded, hyphens and spaces equivalent
    (``yo yo`` == ``yo-yo``), a leading ``a``/``an``/``the`` dropped.
    """
    text = _canonical_text(word).lower().replace("-", " ")
    text = " ".join(text.split())
    return _ARTICLE.sub("", text)


def is_correct(guess: str, solution: str) -> bool:
    return normalize_word(guess) == normalize_word(solution)


def extract_question(reply: str, max_chars: int = 500) -> str:
    """The question a reply asks: its last sentence ending in ``?``, else all of it.

    Players (models especially) often think aloud before asking; the gamemaster and
    the history should see the question, not the preamble.
    """
    text = strip_thinking(reply).strip()
    sentences = [s.strip() for s in question_sentences(text) if s.strip(" ?")]
    question = sentences[-1] if sentences else text
    question = " ".join(question.split())
    return question[:max_chars]


MAX_PLAIN_REQUEST_CHARS = 200
"""Longest reply without a ``?`` that still counts as one request ("Tell me its first
letter"); a longer one is a statement, not a question."""


def find_question(reply: str, *, cut_off: bool = False, max_chars: int = 500) -> str | None:
    """The question a reply asks, or ``None`` when it asks none.

    Its last sentence ending in ``?``; else, for a reply that ended on its own (not
    ``cut_off`` at the length limit), the whole reply when it is one short request
    without sentence breaks ("Tell me the first letter"). A rambling statement ("I'm
    here to help. I'm ready.") or a reply cut off before its question asks nothing:
    sending its fragments to the gamemaster would only teach the player that any text
    gets an answer.
    """
    text = strip_thinking(reply).strip()
    sentences = [s.strip() for s in question_sentences(text) if s.strip(" ?")]
    if sentences:
        return " ".join(sentences[-1].split())[:max_chars]
    request = text.rstrip(" .!")
    if cut_off or not request or len(request) > MAX_PLAIN_REQUEST_CHARS:
        return None
    if SENTENCE_END.search(request):
        return None
    return " ".join(request.split())


def question_sentences(text: str) -> list[str]:
    """Every sentence of ``text`` that ends in ``?`` (with its ``?``), in order.

    What ``re.findall(r"[^.!?\\n]*\\?", text)`` finds, in one pass: that regex tries
    every start position of a long run without ``?`` to its end, so a 200 kB reply
    took minutes.
    """
    sentences = []
    start = 0
    for end in SENTENCE_END.finditer(text):
        if end.group() == "?":
            sentences.append(text[start : end.end()])
        start = end.end()
    return sentences
