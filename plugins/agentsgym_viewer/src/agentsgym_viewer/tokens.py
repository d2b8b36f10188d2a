"""Token text for the token view: each id decoded on its own, checked against the file.

A rollout file stores token ids, not the tokenizer that made them. The viewer
decodes every distinct id once (``decode([id])``, special tokens kept) so both views
show the pieces the model saw; a piece that is part of a multi-byte character
decodes to U+FFFD on its own, which is what that token is. Decoding with the wrong
tokenizer would show confident nonsense, so :func:`check_tokenizer` compares the
decoded ids of an episode with its messages first and the views fall back to ids
when they disagree.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import numpy as np

from agentsgym_viewer.model import ViewedEpisode

logger = logging.getLogger(__name__)

NEWLINE_MARK = "\u21b5"  # ↵, drawn before a newline inside a token


class TokenDecoder:
    """Text of single token ids, cached; ids the tokenizer does not have become ``<id?>``."""

    def __init__(self, tokenizer: Any, name: str | None = None) -> None:
        self.tokenizer = tokenizer
        self.name = name or str(getattr(tokenizer, "name_or_path", type(tokenizer).__name__))
        self.vocab_size = len(tokenizer)
        self._pieces: dict[int, str] = {}

    def piece(self, token_id: int) -> str:
        piece = self._pieces.get(token_id)
        if piece is None:
            if 0 <= token_id < self.vocab_size:
                piece = self.tokenizer.decode(
                    [token_id], skip_special_tokens=False, clean_up_tokenization_spaces=False
                )
            else:
                piece = f"<{token_id}?>"
            self._pieces[token_id] = piece
        return piece

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return [self.piece(int(i)) for i in ids]

    def vocabulary(self, episodes: Iterable[ViewedEpisode]) -> dict[int, str]:
        """The piece of every distinct id in ``episodes`` (what the HTML page embeds)."""
        arrays = [e.tokens.ids for e in episodes if e.tokens is not None]
        used = np.unique(np.concatenate(arrays)) if arrays else np.array([], dtype=np.int64)
        return {i: self.piece(i) for i in used.tolist()}

    def decode(self, ids: list[int]) -> str:
        return str(
            self.tokenizer.decode(
                ids, skip_special_tokens=False, clean_up_tokenization_spaces=False
            )
        )


def check_tokenizer(decoder: TokenDecoder, episodes: Iterable[ViewedEpisode]) -> str | None:
    """None when ``decoder`` decodes the file's tokens into its messages, else why not.

    Looks at up to three tokenized episodes: every id must be in the vocabulary and
    the start of the first env message (rendered verbatim by any chat template; a
    split episode's row may hold only the start of the conversation) must appear in
    the decoded text.
    """
    checked = 0
    for episode in episodes:
        tokens = episode.tokens
        if tokens is None:
            continue
        too_big = tokens.ids[(tokens.ids < 0) | (tokens.ids >= decoder.vocab_size)]
        if too_big.size:
            return (
                f"episode #{episode.index} has token id {int(too_big[0])}, beyond the "
                f"{decoder.vocab_size} ids of tokenizer {decoder.name!r}"
            )
        probe = next(
            (
                m.content.strip().split("\n", 1)[0][:40]
                for m in episode.messages
                if m.role != "assistant" and m.content.strip()
            ),
            "",
        )
        if probe and probe not in decoder.decode(tokens.ids.tolist()):
            return (
                f"the token ids of episode #{episode.index} do not decode to its first message "
                f"with tokenizer {decoder.name!r} (no {probe!r} in them)"
            )
        checked += 1
        if checked == 3:
            break
    return None


def load_decoder(tokenizer: str | None) -> TokenDecoder | None:
    """A :class:`TokenDecoder` for a tokenizer name/path (as in ``rollout``), or None."""
    if tokenizer is None or tokenizer.lower() == "none":
        return None
    from agentsgym import load_tokenizer

    return TokenDecoder(load_tokenizer(tokenizer), tokenizer)


def visible(piece: str) -> str:
    """A piece as drawn in the token view: newlines get a visible mark before them."""
    return piece.replace("\n", NEWLINE_MARK + "\n")
