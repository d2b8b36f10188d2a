"""The full-render path of building an episode's token stream: the reference.

This is how agentsgym tokenized episodes before env turns became deltas against a
small base conversation (agentsgym.tokenization.incremental): every env turn renders
the WHOLE conversation so far and keeps what follows the text the stream holds.
Its cost grows with the square of the episode, but each rule is stated directly:

* an env turn's text is ``render(messages)[len(held):]``; when the rendering no
  longer starts with the held text, a new segment starts from the whole view;
* after a text-only reply, the stream must be a prefix of the whole conversation's
  tokenization (what a chat server conditions on), else a new segment starts;
* a server's reported prompt ids must equal the stream, else a new segment starts
  from the server's ids;
* a new segment takes the place of a current one that holds no agent token;
* sampled ids go in verbatim; a 0-token action is its end-of-turn token.

The property tests drive it and the real EpisodeTokenizer with the same turns and
require identical segments, masks, logprobs and spans.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from agentsgym.tokenization import ChatTokenizer
from agentsgym.types import AgentAction, Messages


@dataclass
class RefSegment:
    token_ids: list[int] = field(default_factory=list)
    agent_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    text: str = ""

    def extend(self, ids: list[int], agent: bool, logprobs: Any = None) -> None:
        self.token_ids += ids
        self.agent_mask += [int(agent)] * len(ids)
        self.logprobs += list(logprobs) if logprobs is not None else [0.0] * len(ids)


@dataclass
class RefSpan:
    segment: int
    positions: list[int]
    token_source: str


class ReferenceEpisodeTokenizer:
    """The whole-conversation rendering of every turn (see the module docstring)."""

    def __init__(self, chat: ChatTokenizer) -> None:
        self.chat = chat
        self.segments: list[RefSegment] = []
        self.has_logprobs = True
        self.last_reply_was_text = False

    @property
    def current(self) -> RefSegment:
        return self.segments[-1]

    def prompt_token_ids(self) -> list[int]:
        return list(self.current.token_ids)

    def _new_segment(self, messages: Messages, view: str) -> None:
        segment = RefSegment(text=view)
        segment.extend(self.chat.encode_prompt(messages), agent=False)
        self._open(segment)

    def _open(self, segment: RefSegment) -> None:
        if self.segments and 1 not in self.current.agent_mask:
            self.segments.pop()
        self.segments.append(segment)

    def add_env_turn(self, messages: Messages, new_messages: Messages) -> None:
        view = self.chat.render(messages, add_generation_prompt=True)
        was_text, self.last_reply_was_text = self.last_reply_was_text, False
        if not self.segments:
            self._new_segment(messages, view)
            return
        held = self.current
        if not view.startswith(held.text):
            self._new_segment(messages, view)
            return
        if was_text:
            whole = self.chat.encode_prompt(messages)
            if whole[: len(held.token_ids)] != held.token_ids:
                self._new_segment(messages, view)
                return
        first_new = len(messages) - len(new_messages)
        ids = self.chat.encode_rendered(
            view,
            messages,
            range(first_new, len(messages)),
            len(held.text),
            lambda m: self.chat.render(m, add_generation_prompt=True),
        )
        held.extend(ids, agent=False)
        held.text = view

    def add_agent_turn(self, action: AgentAction, *, token_in: bool = False) -> RefSpan:
        eot = self.chat.eot_ids
        server_prompt = action.prompt_token_ids if action.token_ids is not None else None
        if server_prompt is not None and list(server_prompt) != self.current.token_ids:
            segment = RefSegment(text=self.current.text)
            segment.extend(list(server_prompt), agent=False)
            self._open(segment)
        segment = self.current
        start = len(segment.token_ids)
        self.last_reply_was_text = action.token_ids is None
        if action.token_ids is not None:
            ids = list(action.token_ids)
            if action.logprobs is None:
                self.has_logprobs = False
            if token_in:
                source = "sampled"
            else:
                source = "server" if action.prompt_token_ids is not None else "unchecked"
            if not ids and action.truncated:  # cut before its first token: eot is context
                segment.extend(eot, agent=False)
                positions = []
            elif not ids:  # a server stripped its stop string: the eot was generated
                segment.extend(eot, agent=True, logprobs=[math.nan] * len(eot))
                positions = list(range(start, start + len(eot)))
            else:
                segment.extend(ids, agent=True, logprobs=action.logprobs)
                positions = list(range(start, start + len(ids)))
                if eot and ids[-len(eot) :] != eot:
                    segment.extend(eot, agent=False)
        else:
            source = "retokenized"
            self.has_logprobs = False
            ids = self.chat.encode_model_text(action.text)
            closed = not action.truncated
            segment.extend(ids + (eot if closed else []), agent=True)
            if not closed:
                segment.extend(eot, agent=False)
            positions = list(range(start, start + len(ids) + (len(eot) if closed else 0)))
        segment.text += action.text + self.chat.eot_text
        return RefSpan(len(self.segments) - 1, positions, source)

    def finish(self, messages: Messages) -> None:
        if not self.segments or not messages or messages[-1].get("role") != "assistant":
            return
        final = self.chat.render(messages, add_generation_prompt=False)
        held = self.current
        if final.startswith(held.text):
            held.extend(self.chat.encode_text(final[len(held.text) :]), agent=False)
            held.text = final
