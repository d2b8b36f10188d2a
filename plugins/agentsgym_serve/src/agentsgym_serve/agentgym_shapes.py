"""The shapes AgentGym's env clients differ in, as the server fills them (docs/serving.md,
"AgentGym's clients").

AgentGym's clients (WooooDyy/AgentGym, ``agentenv/agentenv/envs``) speak one protocol in
two families: BabyAI, TextCraft, SciWorld, ALFWorld and lmrlgym's Maze and Wordle read
``{"id": N}`` from ``/create`` and send ``"id"``; WebShop, SQLGym and the tool envs
read a bare integer and send ``"env_idx"``. Bodies of either family are taken on every
server; the ``/create`` reply is the one thing a server must choose
(``--agentgym-create object|integer``), since both families send the same empty body.

Besides the common fields, replies carry the extras some clients read:
``task_description`` (the episode's first prompt), ``available_actions`` (what the env
declares, see :func:`available_actions`) and ``state`` (WebShop's name for the
observation).

An env whose actions do not survive the sanitiser of BabyAI's and TextCraft's clients
(``re.sub(r"[^A-Za-z0-9, ]+", "", action)``: ``[50]`` becomes ``50``) declares the
format its actions are written back into: a class attribute
``agentgym_action_format = "[{action}]"`` (or the server's
``--agentgym-action-format``). An action that is all letters, digits, commas and
spaces (what the sanitiser leaves) is put into that format; any other action (a client
that does not sanitise) reaches the env as sent.
"""

from __future__ import annotations

import re
from typing import Any, Literal

CreateShape = Literal["object", "integer"]
CREATE_SHAPES: tuple[str, ...] = ("object", "integer")

SANITISED = re.compile(r"[A-Za-z0-9, ]+")
"""What AgentGym's BabyAI and TextCraft clients leave of an action: they apply
``re.sub(r"[^A-Za-z0-9, ]+", "", action)`` and collapse its spaces."""

ACTION_PLACEHOLDER = "{action}"


def check_action_format(action_format: str | None) -> str | None:
    """``action_format`` itself, or ValueError when it has no ``{action}`` placeholder."""
    if action_format is not None and ACTION_PLACEHOLDER not in action_format:
        raise ValueError(
            f"an AgentGym action format must contain {ACTION_PLACEHOLDER}, e.g. "
            f"'[{ACTION_PLACEHOLDER}]'; got {action_format!r}"
        )
    return action_format


def action_format_of(env: object, override: str | None) -> str | None:
    """The format AgentGym actions are written into: the server's, else the env's
    ``agentgym_action_format`` attribute, else None (actions go to the env as sent)."""
    if override is not None:
        return override
    declared = getattr(env, "agentgym_action_format", None)
    return declared if isinstance(declared, str) and ACTION_PLACEHOLDER in declared else None


def format_action(action: str, action_format: str | None) -> str:
    """An AgentGym action as the env reads it: a sanitised action (only letters,
    digits, commas and spaces, not blank) put into ``action_format``; any other as is."""
    if action_format is None or not SANITISED.fullmatch(action) or not action.strip():
        return action
    return action_format.replace(ACTION_PLACEHOLDER, action.strip())


def available_actions(env: object, state: Any) -> list[str]:
    """The actions the env offers in ``state``, for clients that read
    ``available_actions`` (ALFWorld's): its ``agentgym_available_actions(state)`` method
    when it has one, else ``[]``."""
    method = getattr(env, "agentgym_available_actions", None)
    if state is None or not callable(method):
        return []
    return [str(action) for action in method(state)]


def reply_extras(env: object, state: Any, observation: str, prompt: str) -> dict[str, Any]:
    """The fields some of AgentGym's clients read beyond ``observation``, ``reward``,
    ``score`` and ``done``."""
    return {
        "state": observation,
        "task_description": prompt,
        "available_actions": available_actions(env, state),
    }
