"""EpisodeTokenizer: an episode's token stream, built turn by turn.

* An **env turn** adds the chat template's rendering of the new messages (and the
  generation prompt) as a delta against what the stream holds: cheaply, against a
  small base conversation (:mod:`agentsgym.tokenization.incremental`), or by
  rendering the whole conversation where the cheap check fails. If the template
  re-renders earlier turns differently (Qwen3 drops earlier think blocks, Llama-3
  trims replies, the date in a system header changed), the stream is no longer a
  prefix of what the model sees next, and the episode follows what the model really
  sees: a new *segment* starting from the whole re-rendered view
  (``on_template_mismatch="split"``) or a
  :class:`~agentsgym.errors.TemplateMismatchError` (``"error"``).
* An **agent turn** adds the sampled token ids verbatim when the agent returns them
  (plus the end-of-turn token as context when the model stopped without it), or the
  reply text tokenized without special-token parsing plus the end-of-turn token. A
  model server's report of the prompt ids it conditioned on is checked against the
  stream first; when they differ, a new segment starts from the server's ids.
* A **text-only reply** is tokenized on its own, but a chat server tokenizes the
  next prompt whole, where the reply's first characters can merge with the
  generation prompt's last ones (``"assistant\\n"`` + ``"\\n\\nHi"``). The next env
  turn checks that boundary; where the whole tokenization differs, the episode
  splits there, so every prompt of a text-only agent is exactly the tokenization of
  the conversation so far.

Each agent turn records its ``token_source``: ``"sampled"`` (a token-in agent's ids,
generated from this stream), ``"server"`` (ids a server generated, its prompt ids
checked), ``"unchecked"`` (ids without the prompt they came from) or
``"retokenized"`` (text only).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from agentsgym.config import TemplateMismatchPolicy
from agentsgym.errors import TemplateMismatchError
from agentsgym.tokenization.chat import ChatTokenizer
from agentsgym.tokenization.incremental import (
    INCREMENTAL_ROLES,
    base_messages,
    base_view,
    cheap_turn,
    supports_incremental,
)
from agentsgym.types import AgentAction, Messages

logger = logging.getLogger(__name__)


@dataclass
class SegmentBuilder:
    """One self-consistent token stream being built: a view the model saw, plus replies."""

    token_ids: list[int] = field(default_factory=list)
    agent_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    pieces: list[str] = field(default_factory=list)
    base_view: str | None = None
    """The base conversation's rendering when this segment began (cheap turns)."""

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def text(self) -> str:
        """The rendered text this segment holds (joined on demand: only the whole-
        conversation path reads it)."""
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
        self.segments: list[SegmentBuilder] = []
        self.has_logprobs = True
        self.server_mismatches = 0
        """Agent turns whose server-reported prompt ids differed from the stream."""
        self.whole_renders = 0
        """Env turns that rendered the whole conversation (the cheap check failed)."""
        self._base: Messages | None = None
        self._pending_reply: str | None = None
        self._pending_ids: list[int] = []
        self._cheap_shape = False
        """Whether the conversation still has the shape the cheap turn was probed on:
        ``[system] user+ (assistant user+)*``. In other shapes a later message can
        change how an earlier one renders (Qwen3 keeps the think block of a reply
        followed by a system message until a user message comes), which only the
        whole rendering shows, so once left, every turn renders the whole of it."""

    @property
    def current(self) -> SegmentBuilder:
        return self.segments[-1]

    def prompt_token_ids(self) -> list[int]:
        """The ids the model is conditioned on for its next reply."""
        return list(self.current.token_ids)

    # ------------------------------------------------------------------ env turns
    def add_env_turn(self, messages: Messages, new_messages: Messages) -> None:
        """The env's ``new_messages`` (already the last of ``messages``) and the
        generation prompt."""
        if not self.segments:
            system_first = bool(messages) and messages[0].get("role") == "system"
            self._base = base_messages(system_first)
            self._cheap_shape = self.incremental and all(
                m.get("role") in INCREMENTAL_ROLES for m in messages[int(system_first) :]
            )
            self._start_segment(messages)
            return
        if any(m.get("role") not in INCREMENTAL_ROLES for m in new_messages):
            self._cheap_shape = False
        reply_at = len(messages) - len(new_messages) - 1
        reply = messages[reply_at] if reply_at >= 0 else None
        if (
            self._cheap_shape
            and self._base is not None
            and reply is not None
            and reply.get("role") == "assistant"
            and self.current.base_view is not None
        ):
            cheap = cheap_turn(self.chat, self._base, self.current.base_view, reply, new_messages)
            if cheap is not None:
                if self._reply_tokens_hold(messages):
                    self._append(*cheap)
                else:
                    self._mismatch(
                        messages, "the reply's tokens merge with the template text before it"
                    )
                return
        self._whole_turn(messages, len(messages) - len(new_messages))

    def _whole_turn(self, messages: Messages, first_new: int) -> None:
        self.whole_renders += 1
        view = self.chat.render(messages, add_generation_prompt=True)
        held = self.current.text
        if not view.startswith(held):
            self._mismatch(messages, _first_difference(held, view), view=view)
            return
        if not self._reply_tokens_hold(messages):
            self._mismatch(
                messages, "the reply's tokens merge with the template text before it", view=view
            )
            return
        ids = self.chat.encode_rendered(
            view, messages, range(first_new, len(messages)), len(held), self._render_prompt
        )
        self._append(view[len(held) :], ids)

    def _render_prompt(self, messages: Messages) -> str:
        return self.chat.render(messages, add_generation_prompt=True)

    def _append(self, text: str, ids: list[int]) -> None:
        self.current.extend(ids, agent=False)
        self.current.pieces.append(text)

    def _start_segment(self, messages: Messages, view: str | None = None) -> None:
        if view is None:
            view = self.chat.render(messages, add_generation_prompt=True)
        ids = self.chat.encode_rendered(
            view, messages, range(len(messages)), 0, self._render_prompt
        )
        segment = SegmentBuilder(pieces=[view])
        segment.extend(ids, agent=False)
        if self.incremental and self._base is not None:
            segment.base_view = base_view(self.chat, self._base)
        self.segments.append(segment)
        self._pending_reply = None

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
        """Whether the last text-only reply tokenizes the same in context: the ids of
        the generation prompt's tail and the reply, tokenized as one piece, are the
        stream's ids of the two. A reply whose own tokens cannot merge with its
        neighbours (special-token text keeps it a piece of its own) always holds."""
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

    # ------------------------------------------------------------------ agent turns
    def add_agent_turn(self, action: AgentAction, *, token_in: bool = False) -> AgentSpan:
        """The agent's reply; returns where its tokens landed."""
        if action.token_ids is not None and action.prompt_token_ids is not None:
            self._check_server_prompt(action.prompt_token_ids)
        segment = self.current
        start = len(segment)
        eot = self.chat.eot_ids
        if action.token_ids is not None:
            ids = [int(i) for i in action.token_ids]
            source = (
                "sampled"
                if token_in
                else ("server" if action.prompt_token_ids is not None else "unchecked")
            )
            if action.logprobs is None:
                self.has_logprobs = False
            if not ids:
                # Nothing came back (a server that strips its stop string): the turn is
                # its end-of-turn token, which carries the step's reward.
                segment.extend(eot, agent=True, logprobs=[math.nan] * len(eot))
                positions = list(range(start, start + len(eot)))
            else:
                segment.extend(ids, agent=True, logprobs=action.logprobs)
                positions = list(range(start, start + len(ids)))
                if eot and ids[-len(eot) :] != eot:
                    # The model stopped without its end-of-turn (length limit, stop
                    # string); the template adds it, so it is context, not generated.
                    segment.extend(eot, agent=False)
            self._pending_reply = None
        else:
            source = "retokenized"
            self.has_logprobs = False
            ids = self.chat.encode_model_text(action.text)
            closing_is_generated = not action.truncated or not ids
            segment.extend(ids + (eot if closing_is_generated else []), agent=True)
            if not closing_is_generated:
                segment.extend(eot, agent=False)
            positions = list(
                range(start, start + len(ids) + (len(eot) if closing_is_generated else 0))
            )
            self._pending_reply = (
                action.text
                if action.text
                and not self.chat.has_special_text(action.text)
                and segment.endswith(self.chat.generation_prompt)
                else None
            )
            self._pending_ids = ids
        segment.pieces.append(action.text + self.chat.eot_text)
        return AgentSpan(segment=len(self.segments) - 1, positions=positions, token_source=source)

    def _check_server_prompt(self, prompt_ids: Sequence[int]) -> None:
        held = self.current.token_ids
        if len(held) == len(prompt_ids) and held == list(prompt_ids):
            return
        self.server_mismatches += 1
        at = next(
            (i for i, (a, b) in enumerate(zip(held, prompt_ids)) if a != b),
            min(len(held), len(prompt_ids)),
        )
        detail = (
            f"the stream has {len(held)} ids, the server's prompt {len(prompt_ids)}, first "
            f"difference at {at}"
        )
        if self.on_mismatch == "error":
            raise TemplateMismatchError(
                "the model server conditioned on other prompt ids than the episode's stream "
                f"({detail}): it rendered or tokenized the conversation differently. Use a "
                "token-in agent (the openai agent with api='completions') or set env_config "
                "on_template_mismatch='split' to keep one segment per view."
            )
        logger.info("the server's prompt ids differ from the stream (%s); new segment", detail)
        # The server's ids are what the model saw; the text is the same conversation.
        segment = SegmentBuilder(pieces=[self.current.text], base_view=self.current.base_view)
        segment.extend([int(i) for i in prompt_ids], agent=False)
        self.segments.append(segment)

    # ------------------------------------------------------------------ the end
    def finish(self, messages: Messages) -> None:
        """Append the template text after the final reply (e.g. ChatML's newline)."""
        if not self.segments or not messages or messages[-1].get("role") != "assistant":
            return
        self._pending_reply = None
        if self._cheap_shape and self._base is not None and self.current.base_view is not None:
            cheap = cheap_turn(
                self.chat,
                self._base,
                self.current.base_view,
                messages[-1],
                [],
                add_generation_prompt=False,
            )
            if cheap is not None:
                self._append(*cheap)
                return
        final = self.chat.render(messages, add_generation_prompt=False)
        held = self.current.text
        if final.startswith(held):
            self._append(final[len(held) :], self.chat.encode_text(final[len(held) :]))


def _first_difference(held: str, view: str) -> str:
    at = next((i for i, (a, b) in enumerate(zip(held, view)) if a != b), min(len(held), len(view)))
    return (
        f"at character {at}: stream has {held[at : at + 60]!r}, re-rendered view has "
        f"{view[at : at + 60]!r}"
    )
