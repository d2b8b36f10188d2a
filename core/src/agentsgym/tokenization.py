"""Chat-template rendering and token-in/token-out stitching of an episode.

The token stream of an episode is built turn by turn:

* an **environment turn** is the chat template's rendering of the conversation so
  far (with the generation prompt) *minus* the text the stream already holds. That
  delta carries the template tokens between turns (``<|im_end|>\\n<|im_start|>user``
  ...) and doubles as the prefix check: if the template re-renders earlier turns
  differently (e.g. it drops earlier think blocks) the rendering no longer starts
  with the stream, and the episode follows what the model really sees next: a new
  segment starting from the full re-rendered view (``on_template_mismatch="split"``)
  or a :class:`~agentsgym.errors.TemplateMismatchError` (``"error"``).
* an **agent turn** is the sampled token ids verbatim when the agent returns them,
  or the reply text tokenized without special-token parsing plus the template's
  end-of-turn token(s).

Text that is not the model's (observations, task data) is never parsed into special
tokens: when a message's content contains special-token text, that content is
tokenized with special-token parsing switched off.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentsgym.config import TemplateMismatchPolicy
from agentsgym.errors import TemplateMismatchError, TokenFidelityError
from agentsgym.types import AgentAction, Messages

logger = logging.getLogger(__name__)

_SENTINEL = "AGENTSGYMSENTINEL"


def tokenizer_lock(tokenizer: Any) -> threading.Lock:
    """The lock serialising encode calls on one tokenizer object.

    transformers' fast tokenizers keep ``split_special_tokens`` (and padding and
    truncation settings) as state on the shared Rust tokenizer and set it on every
    call, so two threads encoding at once can tokenize template text with special
    tokens switched off. Episodes run in threads and envs may share a tokenizer, so
    the lock lives on the tokenizer itself.
    """
    return tokenizer.__dict__.setdefault("_agentsgym_encode_lock", threading.Lock())


class ChatTokenizer:
    """A tokenizer plus what its chat template puts around an assistant reply."""

    def __init__(self, tokenizer: Any, chat_template_kwargs: dict[str, Any] | None = None) -> None:
        if getattr(tokenizer, "chat_template", None) is None:
            raise TokenFidelityError(
                f"tokenizer {getattr(tokenizer, 'name_or_path', tokenizer)!r} has no chat "
                "template; agentsgym renders every turn with it. Use an instruct/chat "
                "tokenizer or set tokenizer.chat_template."
            )
        self.tokenizer = tokenizer
        self._lock = tokenizer_lock(tokenizer)
        self.template_kwargs = dict(chat_template_kwargs or {})
        self.special_texts = _special_token_texts(tokenizer)
        self.eot_text, self.eot_ids = self._probe_end_of_turn()

    @property
    def pad_token_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = self.tokenizer.eos_token_id
        return 0 if pad is None else int(pad)

    def render(self, messages: Messages, *, add_generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            list(messages),
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            **self.template_kwargs,
        )

    def encode_model_text(self, text: str) -> list[int]:
        """Tokenize text the model produced, never parsing it into special tokens."""
        if not text:
            return []
        with self._lock:
            encoded = self.tokenizer(text, add_special_tokens=False, split_special_tokens=True)
        return list(encoded["input_ids"])

    def encode_template_text(self, text: str, contents: Sequence[str]) -> list[int]:
        """Tokenize rendered template text whose message contents are ``contents``.

        The template's own special tokens are parsed; special-token text inside a
        content is not. When no content holds special-token text the whole string is
        tokenized at once, which is exactly what ``apply_chat_template`` does.
        """
        risky = [c for c in contents if c and self._has_special_text(c)]
        if not risky:
            return self._encode(text)
        ids: list[int] = []
        cursor = 0
        for content in risky:
            start, found = _find_content(text, content, cursor)
            if start < 0:
                raise TokenFidelityError(
                    "a message content holds special-token text, and the chat template "
                    "transformed it beyond recognition, so it cannot be kept out of the "
                    f"special tokens: {content[:80]!r}"
                )
            ids += self._encode(text[cursor:start])
            ids += self.encode_model_text(found)
            cursor = start + len(found)
        ids += self._encode(text[cursor:])
        return ids

    def _encode(self, text: str) -> list[int]:
        if not text:
            return []
        with self._lock:
            encoded = self.tokenizer(text, add_special_tokens=False, split_special_tokens=False)
        return list(encoded["input_ids"])

    def _has_special_text(self, text: str) -> bool:
        return any(s in text for s in self.special_texts)

    def _probe_end_of_turn(self) -> tuple[str, list[int]]:
        """Find the special token(s) the template puts right after assistant content."""
        user = {"role": "user", "content": "hi"}
        rendered = self.render(
            [user, {"role": "assistant", "content": _SENTINEL}], add_generation_prompt=False
        )
        suffix = rendered[rendered.rindex(_SENTINEL) + len(_SENTINEL) :]
        for special in self.special_texts:
            if suffix.startswith(special):
                return special, self._encode(special)
        eos = getattr(self.tokenizer, "eos_token", None)
        if eos and suffix.startswith(eos):
            return eos, self._encode(eos)
        logger.warning(
            "chat template puts no special token after assistant content (suffix %r); "
            "agent turns get no end-of-turn token",
            suffix,
        )
        return "", []

    def is_prefix_preserving(self) -> bool:
        """Whether re-rendering keeps earlier turns (including think blocks) as they were."""
        reply = "<think>\nLet me think.\n</think>\n\nThe answer is 4."
        first = [{"role": "user", "content": "What is 2+2?"}]
        view = self.render(first, add_generation_prompt=True) + reply + self.eot_text
        later = first + [
            {"role": "assistant", "content": reply},
            {"role": "user", "content": "And 3+3?"},
        ]
        return self.render(later, add_generation_prompt=True).startswith(view)


def _special_token_texts(tokenizer: Any) -> list[str]:
    texts: set[str] = set(getattr(tokenizer, "all_special_tokens", []) or [])
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    for token in decoder.values():
        if getattr(token, "special", False):
            texts.add(str(token.content))
    return sorted((t for t in texts if t), key=len, reverse=True)


def _find_content(text: str, content: str, start: int) -> tuple[int, str]:
    for candidate in (content, content.strip()):
        if candidate:
            pos = text.find(candidate, start)
            if pos >= 0:
                return pos, candidate
    return -1, ""


@dataclass
class TokenSegment:
    """One self-consistent token stream: the view the model saw, plus its replies."""

    token_ids: list[int] = field(default_factory=list)
    agent_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    text: str = ""

    def __len__(self) -> int:
        return len(self.token_ids)

    def extend(self, ids: Sequence[int], agent: bool, logprobs: Sequence[float] | None = None) -> None:
        self.token_ids.extend(int(i) for i in ids)
        self.agent_mask.extend([1 if agent else 0] * len(ids))
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))


@dataclass
class AgentSpan:
    """Where one agent action landed: its segment and the positions of its tokens."""

    segment: int
    positions: list[int]


class EpisodeTokenizer:
    """Builds an episode's token segments turn by turn (see the module docstring)."""

    def __init__(self, chat: ChatTokenizer, on_mismatch: TemplateMismatchPolicy = "split") -> None:
        self.chat = chat
        self.on_mismatch = on_mismatch
        self.segments: list[TokenSegment] = []
        self.has_logprobs = True

    @property
    def current(self) -> TokenSegment:
        return self.segments[-1]

    def prompt_token_ids(self) -> list[int]:
        """The ids the model is conditioned on for its next reply."""
        return list(self.current.token_ids)

    def add_env_turn(self, messages: Messages, new_messages: Messages) -> None:
        view = self.chat.render(messages, add_generation_prompt=True)
        if self.segments and view.startswith(self.current.text):
            delta = view[len(self.current.text) :]
            contents = [str(m.get("content", "")) for m in new_messages]
        else:
            if self.segments:
                self._mismatch(view)
            self.segments.append(TokenSegment())
            delta = view
            contents = [str(m.get("content", "")) for m in messages]
        self.current.extend(self.chat.encode_template_text(delta, contents), agent=False)
        self.current.text += delta

    def add_agent_turn(self, action: AgentAction) -> AgentSpan:
        segment = self.current
        start = len(segment)
        eot = self.chat.eot_ids
        if action.token_ids is not None:
            ids = list(action.token_ids)
            segment.extend(ids, agent=True, logprobs=action.logprobs)
            if action.logprobs is None:
                self.has_logprobs = False
            if eot and ids[-len(eot) :] != eot:
                # The model stopped without its end-of-turn (length limit, stop string);
                # the template adds it, so it is context, not a generated token.
                segment.extend(eot, agent=False)
            positions = list(range(start, start + len(ids)))
        else:
            ids = self.chat.encode_model_text(action.text) + eot
            segment.extend(ids, agent=True)
            self.has_logprobs = False
            positions = list(range(start, start + len(ids)))
        segment.text += action.text + self.chat.eot_text
        return AgentSpan(segment=len(self.segments) - 1, positions=positions)

    def finish(self, messages: Messages) -> None:
        """Append the template text after the final reply (e.g. ChatML's newline)."""
        final = self.chat.render(messages, add_generation_prompt=False)
        if self.segments and final.startswith(self.current.text):
            delta = final[len(self.current.text) :]
            self.current.extend(self.chat.encode_template_text(delta, []), agent=False)
            self.current.text += delta

    def _mismatch(self, view: str) -> None:
        held = self.current.text
        at = next((i for i, (a, b) in enumerate(zip(held, view)) if a != b), min(len(held), len(view)))
        detail = f"stream has {held[at:at + 60]!r}, re-rendered view has {view[at:at + 60]!r}"
        if self.on_mismatch == "error":
            raise TemplateMismatchError(
                "the chat template re-renders earlier turns differently from what the model "
                f"saw (at character {at}: {detail}); the template is not prefix-preserving "
                "for this conversation. Set env_config on_template_mismatch='split' to keep "
                "one segment per view, or use a prefix-preserving template."
            )
        logger.info("template is not prefix-preserving here (%s); starting a new segment", detail)
