"""ChatTokenizer: a tokenizer, its chat template, and what the template puts around turns.

Everything an episode's token stream needs from a tokenizer lives here: rendering a
conversation with the chat template, tokenizing rendered template text (the
template's own special tokens parsed, special-token text inside message contents
kept as plain text), tokenizing text the model wrote, and the probes that tell what
the template puts after an assistant reply (its end-of-turn token) and before one
(the generation prompt).
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from agentsgym.errors import TokenFidelityError
from agentsgym.types import Message, Messages

logger = logging.getLogger(__name__)

_SENTINEL = "AGENTSGYMSENTINEL"
# Private-use characters around special-token text inside a content, followed through
# a template that transforms contents (the approach of transformers'
# sanitize_control_tokens).
_MARK_START, _MARK_END = "\ue000", "\ue001"
_MARKED = re.compile(f"{_MARK_START}(.*?){_MARK_END}", re.DOTALL)


def tokenizer_lock(tokenizer: Any) -> threading.Lock:
    """The lock serialising encode calls on one tokenizer object.

    transformers' fast tokenizers keep ``split_special_tokens`` (and padding and
    truncation settings) as state on the shared Rust tokenizer and set it on every
    call, so two threads encoding at once can tokenize template text with special
    tokens switched off. Episodes tokenize in worker threads and envs may share a
    tokenizer, so the lock lives on the tokenizer itself.
    """
    return tokenizer.__dict__.setdefault("_agentsgym_encode_lock", threading.Lock())


class ChatTokenizer:
    """A tokenizer plus what its chat template puts around an assistant reply.

    :ivar eot_text: the template text right after an assistant reply's content when
        it is a special token (ChatML's ``<|im_end|>``, Llama-3's ``<|eot_id|>``),
        else ``""``; ``eot_ids`` are its ids.
    :ivar generation_prompt: the text ``add_generation_prompt=True`` appends.
    :ivar reply_boundary: the end of the generation prompt after its last special
        token (``"assistant\\n"`` for ChatML): the text a reply's first characters
        could merge with when the whole conversation is tokenized at once, or
        ``None`` when the generation prompt holds no special token; ``boundary_ids``
        are its ids.
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
        self._render_direct = _direct_renderer(tokenizer, self.template_kwargs)
        self.eot_text, self.eot_ids = self._probe_end_of_turn()
        self.generation_prompt = self._probe_generation_prompt()
        self.reply_boundary = self._boundary_of(self.generation_prompt)
        self.boundary_ids = self._encode(self.reply_boundary or "")
        self.incremental: bool | None = None
        """Whether env turns may be rendered as a delta (:mod:`.incremental`); probed
        once, on first use, by :func:`~agentsgym.tokenization.incremental.supports_incremental`."""

    @property
    def pad_token_id(self) -> int:
        """The id batches are padded with: the pad token, else the end-of-sequence token
        (Llama-3.2 has no pad token and pads with ``<|eot_id|>``), else 0. Padding is
        masked out of attention, loss and rewards, so any id works."""
        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = self.tokenizer.eos_token_id
        return 0 if pad is None else int(pad)

    # ------------------------------------------------------------------ rendering
    def render(self, messages: Messages, *, add_generation_prompt: bool) -> str:
        """The chat template's text for ``messages``: ``apply_chat_template``'s."""
        if self._render_direct is not None:
            return self._render_direct(messages, add_generation_prompt)
        return _apply_chat_template(
            self.tokenizer, self.template_kwargs, messages, add_generation_prompt
        )

    def encode_prompt(self, messages: Messages, *, add_generation_prompt: bool = True) -> list[int]:
        """The ids of a whole conversation, as a chat server tokenizes it, except that
        special-token text inside message contents stays plain text."""
        text = self.render(messages, add_generation_prompt=add_generation_prompt)
        return self.encode_rendered(
            text,
            messages,
            range(len(messages)),
            0,
            lambda m: self.render(m, add_generation_prompt=add_generation_prompt),
        )

    # ------------------------------------------------------------------ encoding
    def encode_model_text(self, text: str) -> list[int]:
        """Tokenize text the model produced, never parsing it into special tokens."""
        # Without special-token text both settings give the same ids; keeping the
        # tokenizer's setting as it is spares switching it back and forth.
        return self._encode(text, split_special_tokens=self.has_special_text(text))

    def encode_template_text(self, text: str, contents: Sequence[str]) -> list[int]:
        """Tokenize rendered template text whose message contents are ``contents``.

        The template's own special tokens are parsed; special-token text inside a
        content is not: each such content is found in the text (in order) and
        tokenized on its own as plain text. When no content holds special-token text
        the whole string is tokenized at once, which is exactly what
        ``apply_chat_template`` does. :meth:`encode_rendered` finds the contents
        without searching, where it can.
        """
        risky = [c for c in contents if c and self.has_special_text(c)]
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

    def encode_rendered(
        self,
        text: str,
        messages: Messages,
        protect: Sequence[int] | range,
        start: int,
        render: Callable[[Messages], str],
    ) -> list[int]:
        """Tokenize ``text[start:]``, where ``text = render(messages)``.

        The contents of ``messages[i]`` for ``i`` in ``protect`` (the messages rendered
        after ``start``) that hold special-token text are kept out of the special
        tokens. Each such content is located by rendering the conversation again with
        a unique placeholder in its place, which finds it exactly even when the same
        text is also one of the template's own tokens (a content that is just
        ``<|im_start|>``), and is tokenized whole as plain text. A template that
        transforms contents (drops a think block, trims) defeats placeholders; then
        the special-token texts inside the contents are marked and followed through
        the rendering, and only they are tokenized as plain text.
        """
        piece = text[start:]
        risky = [i for i in protect if self.has_special_text(str(messages[i].get("content", "")))]
        if not risky:
            return self._encode(piece)
        ids = self._encode_by_placeholders(piece, messages, risky, start, render)
        if ids is None:
            ids = self._encode_by_markers(piece, messages, risky, start, render)
        if ids is None:
            ids = self.encode_template_text(
                piece, [str(messages[i].get("content", "")) for i in protect]
            )
        return ids

    def _encode_by_placeholders(
        self,
        piece: str,
        messages: Messages,
        risky: list[int],
        start: int,
        render: Callable[[Messages], str],
    ) -> list[int] | None:
        marks = {i: f"AGENTSGYM{uuid.uuid4().hex}X" for i in risky}
        marked = _with_contents(messages, marks)
        try:
            marked_piece = render(marked)[start:]
        except Exception:  # the template refuses a placeholder
            return None
        pieces = _split_at_marks(marked_piece, [marks[i] for i in risky])
        contents = [str(messages[i]["content"]) for i in risky]
        if pieces is None or "".join(_interleave(pieces, contents)) != piece:
            return None
        ids = self._encode(pieces[0])
        for content, after in zip(contents, pieces[1:]):
            ids += self.encode_model_text(content)
            ids += self._encode(after)
        return ids

    def _encode_by_markers(
        self,
        piece: str,
        messages: Messages,
        risky: list[int],
        start: int,
        render: Callable[[Messages], str],
    ) -> list[int] | None:
        contents = {i: str(messages[i]["content"]) for i in risky}
        if any(_MARK_START in c or _MARK_END in c for c in contents.values()):
            return None
        special = re.compile("|".join(re.escape(s) for s in self.special_texts))
        marked = _with_contents(
            messages,
            {
                i: special.sub(lambda m: _MARK_START + m.group(0) + _MARK_END, c)
                for i, c in contents.items()
            },
        )
        try:
            marked_piece = render(marked)[start:]
        except Exception:
            return None
        if marked_piece.replace(_MARK_START, "").replace(_MARK_END, "") != piece:
            return None
        parts = _MARKED.split(marked_piece)  # text, marked token, text, ...
        if any(_MARK_START in p or _MARK_END in p for p in parts[::2]):
            return None  # the template split a marker from its token
        ids: list[int] = []
        for index, part in enumerate(parts):
            ids += self.encode_model_text(part) if index % 2 else self._encode(part)
        return ids

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
            if backend is not None and backend.truncation is None and backend.padding is None:
                # The Rust tokenizer directly: what the Python wrapper does for one text
                # (it switches truncation and padding off, so only then), without building
                # a BatchEncoding: a few times faster on short text.
                if backend.encode_special_tokens != split_special_tokens:
                    backend.encode_special_tokens = split_special_tokens
                return list(backend.encode(text, add_special_tokens=False).ids)
            encoded = self.tokenizer(
                text, add_special_tokens=False, split_special_tokens=split_special_tokens
            )
        return list(encoded["input_ids"])

    # ------------------------------------------------------------------ probes
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

    def _probe_generation_prompt(self) -> str:
        first = [{"role": "user", "content": "hi"}]
        bare = self.render(first, add_generation_prompt=False)
        prompted = self.render(first, add_generation_prompt=True)
        return prompted[len(bare) :] if prompted.startswith(bare) else ""

    def _boundary_of(self, generation_prompt: str) -> str | None:
        last = -1
        for special in self.special_texts:
            at = generation_prompt.rfind(special)
            if at >= 0:
                last = max(last, at + len(special))
        return generation_prompt[last:] if last >= 0 else None

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



def _apply_chat_template(
    tokenizer: Any, kwargs: dict[str, Any], messages: Messages, add_generation_prompt: bool
) -> str:
    return tokenizer.apply_chat_template(  # type: ignore[no-any-return]
        list(messages), tokenize=False, add_generation_prompt=add_generation_prompt, **kwargs
    )


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


def _direct_renderer(
    tokenizer: Any, kwargs: dict[str, Any]
) -> Callable[[Messages, bool], str] | None:
    """The chat template rendered without ``apply_chat_template``'s per-call work
    (resolving the template, copying every message into plain data, building the
    special-token map), which costs several times the rendering of a short turn.
    Used only for plain ``{role, content}`` messages and only when it gives exactly
    ``apply_chat_template``'s text on probe conversations; ``None`` otherwise."""
    try:
        from transformers.utils.chat_template_utils import _compile_jinja_template

        compiled = _compile_jinja_template(tokenizer.get_chat_template())
        variables = {**tokenizer.special_tokens_map, **kwargs}
    except Exception:  # another transformers: apply_chat_template it is
        return None

    def render(messages: Messages, add_generation_prompt: bool) -> str:
        if any(len(m) != 2 or not isinstance(m.get("content"), str) for m in messages):
            return _apply_chat_template(tokenizer, kwargs, messages, add_generation_prompt)
        return compiled.render(  # type: ignore[no-any-return]
            messages=list(messages),
            tools=None,
            documents=None,
            add_generation_prompt=add_generation_prompt,
            **variables,
        )

    try:
        for probe in _DIRECT_PROBES:
            for generation in (True, False):
                if render(probe, generation) != _apply_chat_template(
                    tokenizer, kwargs, probe, generation
                ):
                    return None
    except Exception:
        return None
    return render


def _backend_of(tokenizer: Any) -> Any:
    backend = getattr(tokenizer, "_tokenizer", None)
    if backend is None or not hasattr(backend, "encode_special_tokens"):
        return None
    if not getattr(tokenizer, "is_fast", False):
        return None
    return backend


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


def _with_contents(messages: Messages, contents: dict[int, str]) -> Messages:
    return [
        Message(**{**m, "content": contents[i]}) if i in contents else m  # type: ignore[typeddict-item]
        for i, m in enumerate(messages)
    ]


def _split_at_marks(text: str, marks: list[str]) -> list[str] | None:
    """``text`` cut at each mark, in order; ``None`` unless each occurs exactly once."""
    pieces: list[str] = []
    cursor = 0
    for mark in marks:
        at = text.find(mark, cursor)
        if at < 0 or text.count(mark) != 1:
            return None
        pieces.append(text[cursor:at])
        cursor = at + len(mark)
    pieces.append(text[cursor:])
    return pieces


def _interleave(pieces: list[str], contents: list[str]) -> list[str]:
    out = [pieces[0]]
    for content, piece in zip(contents, pieces[1:]):
        out += [content, piece]
    return out
