"""Env turns rendered as a delta against a small base conversation: linear cost.

The text an env turn adds to the stream is what the chat template renders after the
agent's last reply: the reply's closing template text, the env's new messages and
the generation prompt. Rendering the whole conversation to find it makes each turn
cost the length of the conversation, and an episode the square of its length.

Instead the turn is rendered in a small *base* conversation that stands in for the
history: ``base + [reply] + new_messages``, where ``base`` is a placeholder system
message (when the episode starts with one) and a placeholder user message. The cheap
check is that this rendering starts with ``base_view + reply + eot``, where
``base_view`` is the base's own rendering (with the generation prompt) taken when the
segment began: it holds when the reply renders in the base exactly as the stream
holds it (a template that trims replies or drops think blocks fails it) and when the
template's output has not changed since the segment began (a date that changed
fails it). What follows ``base_view + reply + eot`` is the delta.

Where the check fails, or the new messages are not plain user messages, or the
template is not one whose turns render the same whatever surrounds them
(:func:`probe_incremental`, run once per tokenizer), the turn re-renders the whole
conversation, and the stream follows that rendering exactly as before.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from agentsgym.types import Message, Messages

if TYPE_CHECKING:
    from agentsgym.tokenization.chat import ChatTokenizer

logger = logging.getLogger(__name__)

BASE_SYSTEM = "You are the system prompt that stands in for this conversation."
BASE_USER = "This is the user turn that stands in for the conversation so far."
INCREMENTAL_ROLES = frozenset({"user"})
"""Roles a cheap env turn may add; other roles (system messages mid-episode, tool
results that templates group with their neighbours) re-render the conversation."""


def base_messages(system_first: bool) -> Messages:
    """The stand-in history: a placeholder system message when the episode starts with
    one (templates insert a default system prompt otherwise), then a user message."""
    base: Messages = [Message(role="system", content=BASE_SYSTEM)] if system_first else []
    return base + [Message(role="user", content=BASE_USER)]


def base_view(chat: ChatTokenizer, base: Messages) -> str:
    return chat.render(base, add_generation_prompt=True)


def cheap_turn(
    chat: ChatTokenizer,
    base: Messages,
    view_of_base: str,
    reply: Message,
    new_messages: Messages,
    *,
    add_generation_prompt: bool = True,
) -> tuple[str, list[int]] | None:
    """The (text, ids) an env turn adds after ``reply``, or ``None`` when the cheap
    check fails and the conversation must be rendered whole.

    With no ``new_messages`` and ``add_generation_prompt=False`` it is the template
    text closing the final reply of an episode.
    """
    if any(m.get("role") not in INCREMENTAL_ROLES for m in new_messages):
        return None
    conversation = [*base, reply, *new_messages]

    def render(messages: Messages) -> str:
        return chat.render(messages, add_generation_prompt=add_generation_prompt)

    try:
        text = render(conversation)
    except Exception:  # a template that refuses the stand-in: the full render decides
        logger.debug("the cheap render failed; rendering the whole conversation", exc_info=True)
        return None
    expected = view_of_base + str(reply.get("content", "")) + chat.eot_text
    if not text.startswith(expected):
        return None
    start = len(expected)
    ids = chat.encode_rendered(
        text, conversation, range(len(base) + 1, len(conversation)), start, render
    )
    return text[start:], ids


# Conversations on which the cheap turn must agree with the whole rendering wherever it
# answers at all: replies plain, padded with whitespace, empty, with think blocks;
# one or two new messages per turn; with and without a system prompt. A template
# whose turns depend on what surrounds them (one that marks the last user message,
# numbers turns, moves the system prompt) disagrees on one of them.
_PROBES: list[tuple[Messages, list[tuple[str, Messages | None]]]] = [
    (
        [Message(role="user", content="Guess my number between 1 and 100.")],
        [
            ("[50]", [Message(role="user", content="Higher.")]),
            (
                " [75] ",
                [Message(role="user", content="Lower."), Message(role="user", content="Go on.")],
            ),
            ("", [Message(role="user", content="Say something.")]),
            ("\n\n[62]\n", [Message(role="user", content="Lower.")]),
            ("[56]", None),
        ],
    ),
    (
        [
            Message(role="system", content="Answer briefly."),
            Message(role="user", content="What is 2+2?"),
        ],
        [
            ("<think>\nTwo and two.\n</think>\n\n4", [Message(role="user", content="And 3+3?")]),
            ("6", [Message(role="user", content="And 4+4?")]),
            ("<think>\nEasy.\n</think>\n\n8", None),
        ],
    ),
]


def supports_incremental(chat: ChatTokenizer) -> bool:
    """Whether env turns of ``chat`` may be rendered as a delta against a small base
    conversation instead of re-rendering the whole conversation: probed once per
    tokenizer (:func:`probe_incremental`), on conversations where the two must agree."""
    if chat.incremental is None:
        chat.incremental = probe_incremental(chat)
        if not chat.incremental:
            logger.info(
                "the chat template of %s renders a turn differently depending on the turns "
                "around it; every env turn re-renders the whole conversation",
                getattr(chat.tokenizer, "name_or_path", "the tokenizer"),
            )
    return chat.incremental


def probe_incremental(chat: ChatTokenizer) -> bool:
    """Whether the cheap turn gives the whole rendering's delta on every probe turn
    where it gives one (it may decline; it must never disagree)."""
    try:
        for first, turns in _PROBES:
            if not _agrees(chat, first, turns):
                return False
    except Exception:
        logger.debug("probing the chat template failed", exc_info=True)
        return False
    return True


def _agrees(chat: ChatTokenizer, first: Messages, turns: list[tuple[str, Messages | None]]) -> bool:
    messages = list(first)
    held = chat.render(messages, add_generation_prompt=True)
    base = base_messages(first[0]["role"] == "system")
    view_of_base = base_view(chat, base)
    for reply_text, new_messages in turns:
        reply = Message(role="assistant", content=reply_text)
        messages.append(reply)
        held += reply_text + chat.eot_text
        generation = new_messages is not None
        messages += new_messages or []
        whole = chat.render(messages, add_generation_prompt=generation)
        reference = whole[len(held) :] if whole.startswith(held) else None
        cheap = cheap_turn(
            chat, base, view_of_base, reply, new_messages or [], add_generation_prompt=generation
        )
        if cheap is not None and cheap[0] != reference:
            logger.debug("cheap turn %r disagrees with the whole rendering %r", cheap[0], reference)
            return False
        if reference is None:  # a new segment starts from the whole view
            held = whole
            view_of_base = base_view(chat, base)
        else:
            held += reference
    return True
