"""Tool turns: a reply whose calls the env's toolbox (``env.episode_tools``) answers gets
the tool results as its next prompt, and reaches neither ``step_episode`` nor
``reward_shaping`` (:class:`~agentsgym.engine.session.EpisodeSession` decides it)."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from agentsgym.aio import run_sync
from agentsgym.tokenization import reply_as_rendered
from agentsgym.tokenization.incremental import base_messages
from agentsgym.types import AgentAction, Message, Messages

TOOL_CALLS_KEY = "tool_calls"
"""Step info key of a tool turn: how many calls of the reply were read (0: it tried to
call a tool, and the call could not be read; the model was told why)."""

Answered = tuple[Message, Messages]
"""A toolbox's answer: the reply with its calls as parsed, and the tool results."""


async def episode_toolbox(env: Any, task_data: dict[str, Any]) -> Any:
    """``env.episode_tools(task_data)``, awaited when it is a coroutine (an env whose
    tools live on a server asks it for their schemas)."""
    toolbox = env.episode_tools(task_data)
    return await toolbox if inspect.isawaitable(toolbox) else toolbox


def toolbox_now(env: Any, task_data: dict[str, Any]) -> Any:
    """:func:`episode_toolbox` for a caller outside any episode (``describe``, checks)."""
    toolbox = env.episode_tools(task_data)
    return run_sync(_awaited(toolbox)) if inspect.isawaitable(toolbox) else toolbox


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


class EpisodeTools:
    """One episode's toolbox: its schemas (for the chat template's ``tools=``) and its
    answers to replies (``None``: the reply called no tool)."""

    def __init__(self, toolbox: Any) -> None:
        self.toolbox = toolbox
        self.schemas: tuple[dict[str, Any], ...] = tuple(toolbox.schemas)
        self._keywords = _episode_keywords(toolbox)

    async def answer(self, action: AgentAction, state: Any, session_id: str) -> Answered | None:
        """The toolbox's answer to ``action``, given the episode's current ``state`` and
        its ``session_id`` where ``respond`` takes them: each call says whose episode it
        is, so the toolbox never has to tell episodes apart by their task."""
        episode = {"state": state, "session_id": session_id}
        given = {name: value for name, value in episode.items() if name in self._keywords}
        return await self.toolbox.respond(action, **given)  # type: ignore[no-any-return]


def tool_turn_info(answered: Answered) -> dict[str, Any]:
    """The info of a tool turn: how many calls of the reply were read."""
    return {TOOL_CALLS_KEY: len(answered[0].get("tool_calls") or ())}


def as_written(chat: Any, action: AgentAction, answered: Answered | None) -> AgentAction | None:
    """A reply of calls a chat server parsed, without ids, as the template writes them
    (``None``: tokenize the reply as it is)."""
    if answered is None or action.token_ids is not None or not action.tool_calls:
        return None
    written = reply_as_rendered(chat, base_messages(False), *answered)
    return None if written is None else dataclasses.replace(action, text=written)


EPISODE_KEYWORDS = ("state", "session_id")
"""What an engine tells a toolbox's ``respond`` of the episode, where it takes them."""


def _episode_keywords(toolbox: Any) -> frozenset[str]:
    """The :data:`EPISODE_KEYWORDS` that ``toolbox.respond`` accepts (all of them for a
    ``**kwargs``); a hand-written toolbox of the bare protocol, ``respond(action)``, is
    called with none."""
    try:
        parameters = inspect.signature(toolbox.respond).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a builtin): the bare protocol
        return frozenset()
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return frozenset(EPISODE_KEYWORDS)
    return frozenset(
        p.name for p in parameters if p.name in EPISODE_KEYWORDS and p.kind is not p.POSITIONAL_ONLY
    )
