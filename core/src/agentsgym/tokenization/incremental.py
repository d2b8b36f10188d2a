"""Env turns rendered as a delta against a small base conversation: linear cost.

Rendering the whole conversation for every env turn makes an episode cost the square
of its length. Instead the turn is rendered after a small stand-in history,
``base + [reply] + new_messages``, and what follows ``base_view + reply + eot`` is the
delta. Where that prefix does not hold (a template trims replies or drops think
blocks, a date changed), the new messages are not user messages, or the template fails
the probes of :func:`supports_incremental`, the whole conversation is rendered.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any

from agentsgym.types import Message, Messages

if TYPE_CHECKING:
    from agentsgym.tokenization.chat import ChatTokenizer

logger = logging.getLogger(__name__)

BASE_SYSTEM = "You are the system prompt that stands in for this conversation."
BASE_USER = "This is the user turn that stands in for the conversation so far."
INCREMENTAL_ROLES = frozenset({"user"})
"""Roles a cheap env turn may add; others (system messages mid-episode) re-render the
conversation. Tool results join them where the template passes the tool probes."""


def incremental_roles(chat: ChatTokenizer) -> frozenset[str]:
    """The roles whose messages an env turn of ``chat`` may render as a delta."""
    tools = bool(chat.tools) and supports_incremental(chat, tools=True)
    return INCREMENTAL_ROLES | {"tool"} if tools else INCREMENTAL_ROLES


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
    reply_text: str | None = None,
    roles: frozenset[str] = INCREMENTAL_ROLES,
) -> tuple[str, list[int]] | None:
    """The (text, ids) an env turn adds after ``reply``, or ``None`` when the cheap check
    fails and the conversation must be rendered whole. With no ``new_messages`` and
    ``add_generation_prompt=False``: the text closing an episode's final reply.
    ``reply_text`` is the reply as generated, where ``reply`` holds its parsed tool calls:
    the template must render them back to exactly that text."""
    if any(m.get("role") not in roles for m in new_messages):
        return None
    conversation = [*base, reply, *new_messages]
    render = partial(chat.render, add_generation_prompt=add_generation_prompt)
    try:
        text = render(conversation)
    except Exception:  # a template that refuses the stand-in: the full render decides
        logger.debug("the cheap render failed; rendering the whole conversation", exc_info=True)
        return None
    text_of_reply = str(reply.get("content", "")) if reply_text is None else reply_text
    expected = view_of_base + text_of_reply + chat.eot_text
    if not text.startswith(expected):
        return None
    start, new = len(expected), range(len(base) + 1, len(conversation))
    return text[start:], chat.encode_rendered(text, conversation, new, start, render)


def _reply(content: str) -> Message:
    return Message(role="assistant", content=content)


def _users(*contents: str) -> Messages:
    return [Message(role="user", content=content) for content in contents]


# Conversations on which the cheap turn must agree with the whole rendering wherever it
# answers at all: replies plain, padded, empty, with think blocks; one or two new
# messages per turn; with and without a system prompt. A template whose turns depend
# on their surroundings (marks the last user message, numbers turns) disagrees.
_PROBES: list[tuple[Messages, list[tuple[str, Messages | None]]]] = [
    (
        _users("Guess my number between 1 and 100."),
        [
            ("[50]", _users("Higher.")),
            (" [75] ", _users("Lower.", "Go on.")),
            ("", _users("Say something.")),
            ("\n\n[62]\n", _users("Lower.")),
            ("[56]", None),
        ],
    ),
    (
        [Message(role="system", content="Answer briefly."), *_users("What is 2+2?")],
        [
            ("<think>\nTwo and two.\n</think>\n\n4", _users("And 3+3?")),
            ("6", _users("And 4+4?")),
            ("<think>\nEasy.\n</think>\n\n8", None),
        ],
    ),
]


def _tool_probes(chat: ChatTokenizer) -> list[tuple[Messages, list[tuple[Any, Any]]]]:
    """A call answered, an empty result, then plain turns: with the first declared tool."""
    name = str(chat.tools[0].get("function", chat.tools[0]).get("name", "tool"))

    def call(i: int, result: str) -> tuple[Message, Messages]:
        function = {"name": name, "arguments": {"x": i} if i else {}}
        calls = [{"id": f"call_{i}", "type": "function", "function": function}]
        answer = Message(role="tool", tool_call_id=f"call_{i}", name=name, content=result)
        return Message(role="assistant", content="", tool_calls=calls), [answer]

    turns = [call(2, "5"), call(0, ""), ("It is 5.", _users("Ok.")), ("Bye.", None)]
    return [(_users("What is 2+3?"), turns)]


def supports_incremental(chat: ChatTokenizer, *, tools: bool = False) -> bool:
    """Whether env turns of ``chat`` may be rendered as deltas: probed once per tokenizer;
    wherever the cheap turn answers (it may decline), it must match the whole render.
    ``tools``: whether tool results may, probed on calls of ``chat``'s first tool."""
    attribute = "incremental_tools" if tools else "incremental"
    if getattr(chat, attribute) is None:
        probes = _tool_probes(chat) if tools else _PROBES
        try:
            agrees = all(_agrees(chat, first, turns) for first, turns in probes)
        except Exception:
            logger.debug("probing the chat template failed", exc_info=True)
            agrees = False
        setattr(chat, attribute, agrees)
        if not agrees:
            logger.info(
                "the chat template of %s renders a %s differently depending on the turns "
                "around it; such env turns re-render the whole conversation",
                getattr(chat.tokenizer, "name_or_path", "the tokenizer"),
                "tool result" if tools else "turn",
            )
    return bool(getattr(chat, attribute))


def reply_as_rendered(
    chat: ChatTokenizer, base: Messages, reply: Message, followed_by: Messages = ()
) -> str | None:
    """How the template writes ``reply`` (its tool calls too) after ``base`` and before
    ``followed_by``, between the generation prompt and the end-of-turn text; ``None`` if
    that cannot be told. A scripted agent writes tool calls with it as a model would."""
    view = base_view(chat, base)
    closed = chat.render([*base, reply, *followed_by], add_generation_prompt=False)
    end = closed.find(chat.eot_text, len(view)) if chat.eot_text else -1
    return closed[len(view) : end] if closed.startswith(view) and end >= len(view) else None


def _agrees(chat: ChatTokenizer, first: Messages, turns: list[tuple[Any, Messages | None]]) -> bool:
    messages = list(first)
    held = chat.render(messages, add_generation_prompt=True)
    base = base_messages(first[0]["role"] == "system")
    view_of_base = base_view(chat, base)
    roles = INCREMENTAL_ROLES | {"tool"}
    for turn_reply, new_messages in turns:
        reply = turn_reply if isinstance(turn_reply, dict) else _reply(turn_reply)
        tool_call = "tool_calls" in reply
        reply_text = reply_as_rendered(chat, base, reply, new_messages or []) if tool_call else None
        messages.append(reply)
        held += (reply_text if reply_text is not None else reply["content"]) + chat.eot_text
        generation = new_messages is not None
        new = new_messages or []
        messages += new
        whole = chat.render(messages, add_generation_prompt=generation)
        reference = whole[len(held) :] if whole.startswith(held) else None
        cheap = cheap_turn(
            chat,
            base,
            view_of_base,
            reply,
            new,
            add_generation_prompt=generation,
            reply_text=reply_text,
            roles=roles,
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
