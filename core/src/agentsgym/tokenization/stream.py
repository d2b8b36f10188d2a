"""EpisodeTokenizer: an episode's token stream, built turn by turn.

* An **env turn** adds the rendering of the new messages and the generation prompt
  (:mod:`.incremental`). If the template re-renders earlier turns differently (Qwen3
  drops think blocks, a date changed), the stream is no longer a prefix of what the
  model sees next: a new *segment* starts from the new view, or with
  ``on_template_mismatch="error"`` a :class:`~agentsgym.errors.TemplateMismatchError`.
* An **agent turn** adds the sampled ids verbatim, or the reply text tokenized without
  special-token parsing. Server-reported prompt ids that differ from the stream start a
  new segment from them.
* A new segment **replaces** the current one when that holds no agent token yet (a first
  prompt the server rendered otherwise; a view re-rendered and then not the server's
  either): it is context the model never sampled in, and as a row it would train nothing.
* A **text-only reply** can merge with the generation prompt when a server tokenizes
  the next prompt whole (``"assistant\\n"`` + ``"\\n\\nHi"``); the next env turn checks
  that boundary and splits where it differs.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

from agentsgym.config import TemplateMismatchPolicy
from agentsgym.errors import TemplateMismatchError
from agentsgym.tokenization.chat import ChatTokenizer
from agentsgym.tokenization.incremental import (
    base_messages,
    base_view,
    cheap_turn,
    incremental_roles,
    supports_incremental,
)
from agentsgym.types import AgentAction, Message, Messages

logger = logging.getLogger(__name__)

_REPLY_MERGES = "the reply's tokens merge with the template text before it"


@dataclass
class SegmentBuilder:
    """One self-consistent token stream being built: a view the model saw, plus replies."""

    token_ids: list[int] = field(default_factory=list)
    agent_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    pieces: list[str] = field(default_factory=list)
    base_view: str | None = None  # the base conversation's rendering when this began

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def text(self) -> str:
        """The rendered text this segment holds (joined on demand)."""
        if len(self.pieces) > 1:
            self.pieces[:] = ["".join(self.pieces)]
        return self.pieces[0] if self.pieces else ""

    def endswith(self, suffix: str) -> bool:
        tail = ""
        for piece in reversed(self.pieces):
            tail = piece + tail
            if len(tail) >= len(suffix):
                break
        return tail.endswith(suffix)

    @property
    def has_agent_tokens(self) -> bool:
        return any(self.agent_mask)

    def extend(
        self, ids: Sequence[int], agent: bool, logprobs: Sequence[float] | None = None
    ) -> None:
        self.token_ids.extend(ids)
        self.agent_mask.extend([1 if agent else 0] * len(ids))
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))


@dataclass
class AgentSpan:
    """Where one agent action landed: its segment, its token positions, its source."""

    segment: int
    positions: list[int]
    token_source: str = "retokenized"


class EpisodeTokenizer:
    """Builds an episode's token segments turn by turn (see the module docstring)."""

    def __init__(
        self,
        chat: ChatTokenizer,
        on_mismatch: TemplateMismatchPolicy = "split",
        *,
        incremental: bool | None = None,
    ) -> None:
        self.chat = chat
        self.on_mismatch = on_mismatch
        self.incremental = supports_incremental(chat) if incremental is None else incremental
        self.roles = incremental_roles(chat) if self.incremental else frozenset()
        self._reply_text: str | None = None  # the last reply as generated
        self.segments: list[SegmentBuilder] = []
        self.has_logprobs = True
        self.whole_renders = 0  # env turns that rendered the whole conversation
        self.server_mismatches = 0  # agent turns whose server prompt ids were not the stream
        self._base: Messages | None = None
        self._pending_reply: str | None = None
        self._pending_ids: list[int] = []
        self._render_prompt = partial(chat.render, add_generation_prompt=True)
        self._cheap_shape = False
        """Whether the conversation still has the probed shape ``[system] user+ (assistant
        user+)*``. In others a later message can change how an earlier one renders (Qwen3
        drops a think block only once a user message follows), so turns render whole."""

    @property
    def current(self) -> SegmentBuilder:
        return self.segments[-1]

    def prompt_token_ids(self) -> list[int]:
        """The ids the model is conditioned on for its next reply."""
        return list(self.current.token_ids)

    def add_env_turn(self, messages: Messages, new_messages: Messages) -> None:
        """Add the env's ``new_messages`` (the last of ``messages``) and the generation prompt."""
        if not self.segments:
            system_first = bool(messages) and messages[0].get("role") == "system"
            self._base = base_messages(system_first)
            self._cheap_shape = self.incremental and all(
                m.get("role") in self.roles for m in messages[int(system_first) :]
            )
            self._start_segment(messages)
            return
        if any(m.get("role") not in self.roles for m in new_messages):
            self._cheap_shape = False
        reply_at = len(messages) - len(new_messages) - 1
        cheap = self._cheap_turn(messages[reply_at], new_messages) if reply_at >= 0 else None
        if cheap is None:
            self._whole_turn(messages, reply_at + 1)
        elif self._reply_tokens_hold(messages):
            self._append(*cheap)
        else:
            self._mismatch(messages, _REPLY_MERGES)

    def _cheap_turn(
        self, reply: Message, new_messages: Messages, add_generation_prompt: bool = True
    ) -> tuple[str, list[int]] | None:
        """:func:`~agentsgym.tokenization.incremental.cheap_turn` where it may apply."""
        base, view = self._base, self.current.base_view
        usable = self._cheap_shape and reply.get("role") == "assistant"
        if not usable or base is None or view is None:
            return None
        return cheap_turn(
            self.chat,
            base,
            view,
            reply,
            new_messages,
            add_generation_prompt=add_generation_prompt,
            reply_text=self._reply_text,
            roles=self.roles,
        )

    def _whole_turn(self, messages: Messages, first_new: int) -> None:
        self.whole_renders += 1
        view = self._render_prompt(messages)
        held = self.current.text
        if not view.startswith(held):
            at = _first_mismatch(held, view)
            detail = (
                f"at character {at}: stream has {held[at : at + 60]!r}, re-rendered view has "
                f"{view[at : at + 60]!r}"
            )
            self._mismatch(messages, detail, view=view)
            return
        if not self._reply_tokens_hold(messages):
            self._mismatch(messages, _REPLY_MERGES, view=view)
            return
        ids = self.chat.encode_rendered(
            view, messages, range(first_new, len(messages)), len(held), self._render_prompt
        )
        self._append(view[len(held) :], ids)

    def _append(self, text: str, ids: list[int]) -> None:
        self.current.extend(ids, agent=False)
        self.current.pieces.append(text)

    def _start_segment(self, messages: Messages, view: str | None = None) -> None:
        if view is None:
            view = self._render_prompt(messages)
        ids = self.chat.encode_rendered(
            view, messages, range(len(messages)), 0, self._render_prompt
        )
        segment = SegmentBuilder(pieces=[view])
        segment.extend(ids, agent=False)
        if self.incremental and self._base is not None:
            segment.base_view = base_view(self.chat, self._base)
        self._open(segment)
        self._pending_reply = None

    def _open(self, segment: SegmentBuilder) -> None:
        """``segment`` becomes the current one: after the current one, or in its place
        when the current one holds no agent token (nothing in it would be trained)."""
        if self.segments and not self.current.has_agent_tokens:
            self.segments[-1] = segment
        else:
            self.segments.append(segment)

    def _mismatch(self, messages: Messages, detail: str, *, view: str | None = None) -> None:
        if self.on_mismatch == "error":
            raise TemplateMismatchError(
                "the chat template re-renders earlier turns differently from what the model "
                f"saw ({detail}); the template is not prefix-preserving for this "
                "conversation. Set env_config on_template_mismatch='split' to keep one "
                "segment per view, or use a prefix-preserving template."
            )
        logger.info(
            "the stream is not a prefix of the next view (%s); starting a new segment", detail
        )
        self._start_segment(messages, view)

    def _reply_tokens_hold(self, messages: Messages) -> bool:
        """Whether the last text-only reply tokenizes the same in context: the generation
        prompt's tail and the reply, tokenized as one piece, give the stream's ids of the
        two. A reply that cannot merge (special-token text fences it in) always holds."""
        text, self._pending_reply = self._pending_reply, None
        if text is None:
            return True
        boundary = self.chat.reply_boundary
        if boundary is None or not self.chat.eot_text:
            # No special token fences the reply in (rare templates): compare the stream
            # with the whole conversation's tokenization, at the cost of its length.
            held = self.current.token_ids
            return self.chat.encode_prompt(messages)[: len(held)] == held
        ids = self._pending_ids
        return self.chat.encode_text(boundary + text) == self.chat.boundary_ids + ids

    def add_agent_turn(self, action: AgentAction, *, token_in: bool = False) -> AgentSpan:
        """The agent's reply; returns where its tokens landed."""
        if action.token_ids is not None and action.prompt_token_ids is not None:
            self._check_server_prompt(action.prompt_token_ids)
        segment = self.current
        start = len(segment)
        eot = self.chat.eot_ids
        if action.token_ids is not None:
            ids = [int(i) for i in action.token_ids]
            source = "server" if action.prompt_token_ids is not None else "unchecked"
            if token_in:
                source = "sampled"
            if action.logprobs is None:
                self.has_logprobs = False
            # Nothing came back: a server that strips its stop string generated the turn's
            # end-of-turn token (it carries the step's reward); a reply cut before its
            # first token generated nothing, so its end-of-turn is context.
            generated = ids or ([] if action.truncated else eot)
            segment.extend(
                generated,
                agent=True,
                logprobs=action.logprobs if ids else [math.nan] * len(generated),
            )
            if not generated or (ids and eot and ids[-len(eot) :] != eot):
                # The model stopped without its end-of-turn (length limit, stop string);
                # the template adds it, so it is context, not generated.
                segment.extend(eot, agent=False)
            self._pending_reply = None
        else:
            source = "retokenized"
            self.has_logprobs = False
            ids = self.chat.encode_model_text(action.text)
            # A reply cut at the length limit did not generate its end-of-turn token.
            closed = not action.truncated
            generated = ids + eot if closed else ids
            segment.extend(generated, agent=True)
            if not closed:
                segment.extend(eot, agent=False)
            # Only a reply that can merge with the generation prompt before it is checked.
            plain = bool(action.text) and not self.chat.has_special_text(action.text)
            merges = plain and segment.endswith(self.chat.generation_prompt)
            self._pending_reply = action.text if merges else None
            self._pending_ids = ids
        segment.pieces.append(action.text + self.chat.eot_text)
        self._reply_text = action.text
        positions = list(range(start, start + len(generated)))
        return AgentSpan(segment=len(self.segments) - 1, positions=positions, token_source=source)

    def _check_server_prompt(self, prompt_ids: Sequence[int]) -> None:
        held = self.current.token_ids
        if held == list(prompt_ids):
            return
        detail = (
            f"the stream has {len(held)} ids, the server's prompt {len(prompt_ids)}, first "
            f"difference at {_first_mismatch(held, prompt_ids)}"
        )
        if self.on_mismatch == "error":
            raise TemplateMismatchError(
                "the model server conditioned on other prompt ids than the episode's stream "
                f"({detail}): it rendered or tokenized the conversation differently. Use a "
                "token-in agent (the openai agent with api='completions') or set env_config "
                "on_template_mismatch='split' to keep one segment per view."
            )
        logger.info("the server's prompt ids differ from the stream (%s); new segment", detail)
        self.server_mismatches += 1
        # The server's ids are what the model saw; the text is the same conversation.
        segment = SegmentBuilder(pieces=[self.current.text], base_view=self.current.base_view)
        segment.extend([int(i) for i in prompt_ids], agent=False)
        self._open(segment)

    def finish(self, messages: Messages) -> None:
        """Append the template text after the final reply (e.g. ChatML's newline)."""
        if not self.segments or not messages or messages[-1].get("role") != "assistant":
            return
        self._pending_reply = None
        cheap = self._cheap_turn(messages[-1], [], add_generation_prompt=False)
        if cheap is not None:
            self._append(*cheap)
            return
        final = self.chat.render(messages, add_generation_prompt=False)
        held = self.current.text
        if final.startswith(held):
            self._append(final[len(held) :], self.chat.encode_text(final[len(held) :]))


def _first_mismatch(a: Sequence[object], b: Sequence[object]) -> int:
    """The first index where ``a`` and ``b`` differ, else the shorter length."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
