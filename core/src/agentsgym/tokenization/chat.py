"""ChatTokenizer: a tokenizer, its chat template, and what the template puts around turns.

Rendered template text is tokenized with the template's special tokens parsed but
special-token text inside message contents kept as plain text, as model output is.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import uuid
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from agentsgym.errors import TokenFidelityError
from agentsgym.types import Message, Messages

logger = logging.getLogger(__name__)

_SENTINEL = "AGENTSGYMSENTINEL"
# Private-use characters around special-token text inside a content, followed through a
# template that transforms contents (the approach of transformers' sanitize_control_tokens).
_MARK_START, _MARK_END = "\ue000", "\ue001"
_MARKED = re.compile(f"{_MARK_START}(.*?){_MARK_END}", re.DOTALL)

Render = Callable[[Messages], str]


def tokenizer_lock(tokenizer: Any) -> threading.Lock:
    """The lock serialising encode calls on one tokenizer object (which envs may share):
    fast tokenizers keep ``split_special_tokens`` (and padding, truncation) as state on
    the shared Rust tokenizer, so concurrent encodes could see each other's settings."""
    return tokenizer.__dict__.setdefault("_agentsgym_encode_lock", threading.Lock())


class ChatTokenizer:
    """A tokenizer plus what its chat template puts around an assistant reply.

    :ivar eot_text: the special token right after an assistant reply's content
        (ChatML's ``<|im_end|>``, Llama-3's ``<|eot_id|>``), else ``""``; ids ``eot_ids``.
    :ivar generation_prompt: the text ``add_generation_prompt=True`` appends.
    :ivar reply_boundary: the generation prompt after its last special token
        (``"assistant\\n"`` for ChatML), which a reply's first characters could merge
        with; ``None`` without a special token there. Ids ``boundary_ids``.
    """

    def __init__(self, tokenizer: Any, chat_template_kwargs: dict[str, Any] | None = None) -> None:
        if getattr(tokenizer, "chat_template", None) is None:
            raise TokenFidelityError(
                f"tokenizer {getattr(tokenizer, 'name_or_path', tokenizer)!r} has no chat "
                "template; agentsgym renders every turn with it. Use an instruct/chat "
                "tokenizer or set tokenizer.chat_template."
            )
        self.tokenizer = tokenizer
        self._lock = tokenizer_lock(tokenizer)
        self._backend = _backend_of(tokenizer)
        self.template_kwargs = dict(chat_template_kwargs or {})
        self.special_texts = _special_token_texts(tokenizer)
        self._specials = re.compile("(" + ("|".join(map(re.escape, self.special_texts)) or "(?!)") + ")")
        self._render = _renderer(tokenizer, self.template_kwargs)
        self.eot_text, self.eot_ids = self._probe_end_of_turn()
        self.generation_prompt = self._probe_generation_prompt()
        self.reply_boundary = self._boundary_of(self.generation_prompt)
        self.boundary_ids = self._encode(self.reply_boundary or "")
        self.incremental: bool | None = None  # set on first use by supports_incremental
        self.incremental_tools: bool | None = None  # likewise, for tool results
        self._with_tools: dict[str, ChatTokenizer] = {}

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tool schemas every rendering declares (``tools=`` of the template)."""
        return list(self.template_kwargs.get("tools") or [])

    def with_tools(self, tools: Sequence[dict[str, Any]]) -> ChatTokenizer:
        """This template rendering with ``tools`` declared; one per tool set (cached)."""
        key = json.dumps(list(tools), sort_keys=True, default=str)
        chat = self._with_tools.get(key)
        if chat is None:
            if len(self._with_tools) >= 64:  # tool sets that differ per episode
                self._with_tools.clear()
            kwargs = {**self.template_kwargs, "tools": list(tools)}
            chat = self._with_tools[key] = ChatTokenizer(self.tokenizer, kwargs)
        return chat

    @property
    def pad_token_id(self) -> int:
        """The pad token, else the end-of-sequence token (Llama-3.2 has no pad token),
        else 0. Padding is masked out of attention, loss and rewards, so any id works."""
        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = self.tokenizer.eos_token_id
        return 0 if pad is None else int(pad)

    def render(self, messages: Messages, *, add_generation_prompt: bool) -> str:
        """The chat template's text for ``messages``: ``apply_chat_template``'s."""
        return self._render(messages, add_generation_prompt)

    def encode_prompt(self, messages: Messages, *, add_generation_prompt: bool = True) -> list[int]:
        """The ids of a whole conversation, as a chat server tokenizes it, except that
        special-token text inside message contents stays plain text."""
        render = partial(self.render, add_generation_prompt=add_generation_prompt)
        return self.encode_rendered(render(messages), messages, range(len(messages)), 0, render)

    def encode_model_text(self, text: str) -> list[int]:
        """Tokenize text the model produced, never parsing it into special tokens."""
        # Without special-token text both settings give the same ids, so the shared
        # tokenizer's setting is switched (and put back) only for text that holds some.
        return self._encode(text, split_special_tokens=self.has_special_text(text))

    def encode_template_text(self, text: str, contents: Sequence[str]) -> list[int]:
        """Tokenize rendered template text, finding each of ``contents`` that holds
        special-token text in it (in order) and tokenizing that as plain text."""
        parts: list[str] = []
        cursor = 0
        for content in (c for c in contents if c and self.has_special_text(c)):
            start, found = _find_content(text, content, cursor)
            if start < 0:
                raise TokenFidelityError(
                    "a message content holds special-token text, and the chat template "
                    "transformed it beyond recognition, so it cannot be kept out of the "
                    f"special tokens: {content[:80]!r}"
                )
            parts += [text[cursor:start], found]
            cursor = start + len(found)
        return self._encode_parts([*parts, text[cursor:]])

    def encode_rendered(
        self, text: str, messages: Messages, protect: Sequence[int], start: int, render: Render
    ) -> list[int]:
        """Tokenize ``text[start:]``, where ``text = render(messages)``, keeping the
        special-token text in the contents of ``messages[i]``, ``i`` in ``protect``, out
        of the special tokens. Such a content is located by re-rendering with a unique
        placeholder in its place, exact even for a content that is just ``<|im_start|>``;
        templates that transform contents (trim, drop think blocks) defeat that, so then
        its special-token texts are marked and followed through the rendering, and as a
        last resort the contents are searched for in the text."""
        piece = text[start:]
        risky = [i for i in protect if self.has_special_text(str(messages[i].get("content", "")))]
        if not risky:
            return self._encode(piece)
        env_text = [messages[i]["role"] != "assistant" for i in risky]
        parts = self._split_by_placeholders(piece, messages, risky, start, render)
        if parts is not None:  # env text reads as plain text would; replies as generated
            return self._encode_parts(parts, env_text)
        parts = self._split_by_markers(piece, messages, risky, start, render)
        if parts is None:
            contents = [str(messages[i].get("content", "")) for i in protect]
            return self.encode_template_text(piece, contents)
        return self._encode_parts(parts, [all(env_text)] * len(parts))  # (marks: in no order)

    def _encode_parts(self, parts: list[str], merges: Sequence[bool] = ()) -> list[int]:
        """Template and model text alternating; special tokens come from the template only.
        Model text ``j`` with ``merges[j]`` is tokenized with the text around it, else alone."""
        ids: list[int] = []
        run = ""
        for index, part in enumerate(parts):
            if index % 2 and not (index // 2 < len(merges) and merges[index // 2]):
                ids += self.encode_model_text(run) + self.encode_model_text(part)
                run = ""
                continue
            pieces = [part] if index % 2 else self._specials.split(part)  # text, token, ...
            for k, piece in enumerate(pieces):
                if k % 2:
                    ids += self.encode_model_text(run) + self._encode(piece)
                    run = ""
                else:
                    run += piece
        return ids + self.encode_model_text(run)

    def _split_by_placeholders(
        self, piece: str, messages: Messages, risky: list[int], start: int, render: Render
    ) -> list[str] | None:
        """``piece`` cut around the risky contents, located by placeholders, or ``None``."""
        marks = {i: f"AGENTSGYM{uuid.uuid4().hex}X" for i in risky}
        marked_piece = _render_with_contents(messages, marks, start, render)
        if marked_piece is None:
            return None
        pieces = _split_at_marks(marked_piece, [marks[i] for i in risky])
        if pieces is None:
            return None
        parts = [pieces[0]]
        for i, after in zip(risky, pieces[1:]):
            parts += [str(messages[i]["content"]), after]
        return parts if "".join(parts) == piece else None

    def _split_by_markers(
        self, piece: str, messages: Messages, risky: list[int], start: int, render: Render
    ) -> list[str] | None:
        """``piece`` cut around the risky contents' special-token texts, or ``None``."""
        contents = {i: str(messages[i]["content"]) for i in risky}
        if any(_MARK_START in c or _MARK_END in c for c in contents.values()):
            return None
        mark = partial(self._specials.sub, lambda m: _MARK_START + m.group(0) + _MARK_END)
        marked = {i: mark(c) for i, c in contents.items()}
        marked_piece = _render_with_contents(messages, marked, start, render)
        if marked_piece is None:
            return None
        if marked_piece.replace(_MARK_START, "").replace(_MARK_END, "") != piece:
            return None
        parts = _MARKED.split(marked_piece)  # text, marked token, text, ...
        if any(_MARK_START in p or _MARK_END in p for p in parts[::2]):
            return None  # the template split a marker from its token
        return parts

    def has_special_text(self, text: str) -> bool:
        """Whether ``text`` holds the text of one of the tokenizer's special tokens."""
        return any(s in text for s in self.special_texts)

    def encode_text(self, text: str) -> list[int]:
        """Tokenize template text, parsing special tokens (no content protection)."""
        return self._encode(text)

    def _encode(self, text: str, *, split_special_tokens: bool = False) -> list[int]:
        if not text:
            return []
        with self._lock:
            backend = self._backend
            # The setting lives on the tokenizer that the caller (and other envs, agents,
            # trainers) share: switched for this call only, then put back as it was.
            before = None if backend is None else backend.encode_special_tokens
            try:
                if backend is not None and backend.truncation is None and backend.padding is None:
                    # The Rust tokenizer directly: what the Python wrapper does for one
                    # text (it switches truncation and padding off, so only then), without
                    # building a BatchEncoding: a few times faster on short text.
                    if before != split_special_tokens:
                        backend.encode_special_tokens = split_special_tokens
                    return list(backend.encode(text, add_special_tokens=False).ids)
                encoded = self.tokenizer(
                    text, add_special_tokens=False, split_special_tokens=split_special_tokens
                )
            finally:
                if backend is not None and backend.encode_special_tokens != before:
                    backend.encode_special_tokens = before
        return list(encoded["input_ids"])

    def _probe_end_of_turn(self) -> tuple[str, list[int]]:
        """Find the special token(s) the template puts right after assistant content."""
        user = {"role": "user", "content": "hi"}
        rendered = self.render(
            [user, {"role": "assistant", "content": _SENTINEL}], add_generation_prompt=False
        )
        suffix = rendered[rendered.rindex(_SENTINEL) + len(_SENTINEL) :]
        eos = getattr(self.tokenizer, "eos_token", None)
        for candidate in [*self.special_texts, eos]:
            if candidate and suffix.startswith(candidate):
                return candidate, self._encode(candidate)
        logger.warning(
            "chat template puts no special token after assistant content (suffix %r); "
            "agent turns get no end-of-turn token",
            suffix,
        )
        return "", []

    def _probe_generation_prompt(self) -> str:
        first = [{"role": "user", "content": "hi"}]
        bare = self.render(first, add_generation_prompt=False)
        prompted = self.render(first, add_generation_prompt=True)
        return prompted[len(bare) :] if prompted.startswith(bare) else ""

    def _boundary_of(self, generation_prompt: str) -> str | None:
        ends = [at + len(s) for s in self.special_texts if (at := generation_prompt.rfind(s)) >= 0]
        return generation_prompt[max(ends) :] if ends else None

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


_DIRECT_PROBES: list[Messages] = [
    [Message(role="user", content="hi")],
    [
        Message(role="system", content="Be brief."),
        Message(role="user", content=" What is 2+2?\n"),
        Message(role="assistant", content="<think>\nfour\n</think>\n\n4"),
        Message(role="user", content="And 3+3?"),
        Message(role="assistant", content=" 6 "),
    ],
]


def _renderer(tokenizer: Any, kwargs: dict[str, Any]) -> Callable[[Messages, bool], str]:
    """``apply_chat_template``, or where it agrees on probe conversations, the compiled
    template rendered directly for plain ``{role, content}`` messages, sparing
    ``apply_chat_template``'s per-call work (several times a short turn's rendering)."""

    def apply(messages: Messages, add_generation_prompt: bool) -> str:
        return tokenizer.apply_chat_template(  # type: ignore[no-any-return]
            list(messages), tokenize=False, add_generation_prompt=add_generation_prompt, **kwargs
        )

    try:
        from transformers.utils.chat_template_utils import _compile_jinja_template

        compiled = _compile_jinja_template(tokenizer.get_chat_template())
        variables = {**tokenizer.special_tokens_map, **kwargs}
    except Exception:  # noqa: BLE001 - another transformers: apply_chat_template it is
        return apply

    def render(messages: Messages, add_generation_prompt: bool) -> str:
        if any(len(m) != 2 or not isinstance(m.get("content"), str) for m in messages):
            return apply(messages, add_generation_prompt)
        return compiled.render(  # type: ignore[no-any-return]
            messages=list(messages),
            add_generation_prompt=add_generation_prompt,
            **{"tools": None, "documents": None, **variables},
        )

    try:
        agrees = all(
            render(probe, generation) == apply(probe, generation)
            for probe in _DIRECT_PROBES
            for generation in (True, False)
        )
    except Exception:  # noqa: BLE001 - any failure means: use apply_chat_template
        return apply
    return render if agrees else apply


def _backend_of(tokenizer: Any) -> Any:
    """The Rust tokenizer of a fast transformers tokenizer, else ``None``."""
    backend = getattr(tokenizer, "_tokenizer", None)
    fast = getattr(tokenizer, "is_fast", False) and hasattr(backend, "encode_special_tokens")
    return backend if fast else None


def _special_token_texts(tokenizer: Any) -> list[str]:
    texts: set[str] = set(getattr(tokenizer, "all_special_tokens", []) or [])
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    texts.update(str(t.content) for t in decoder.values() if getattr(t, "special", False))
    return sorted((t for t in texts if t), key=len, reverse=True)


def _find_content(text: str, content: str, start: int) -> tuple[int, str]:
    for candidate in (content, content.strip()):
        if candidate:
            pos = text.find(candidate, start)
            if pos >= 0:
                return pos, candidate
    return -1, ""


def _render_with_contents(
    messages: Messages, contents: dict[int, str], start: int, render: Render
) -> str | None:
    """``render(messages)[start:]`` with some contents replaced; ``None`` if refused."""
    replaced = [
        Message(**{**m, "content": contents[i]}) if i in contents else m  # type: ignore[typeddict-item]
        for i, m in enumerate(messages)
    ]
    try:
        return render(replaced)[start:]
    except Exception:  # noqa: BLE001 - the template refuses the stand-in content
        return None


def _split_at_marks(text: str, marks: list[str]) -> list[str] | None:
    """``text`` cut at each mark, in order; ``None`` unless each occurs exactly once."""
    pieces = [text]
    for mark in marks:
        head, found, tail = pieces[-1].partition(mark)
        if not found or text.count(mark) != 1:
            return None
        pieces[-1:] = [head, tail]
    return pieces
