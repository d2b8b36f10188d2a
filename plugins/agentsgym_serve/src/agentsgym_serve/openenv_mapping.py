"""How an OpenEnv server's observations become messages, and a reply becomes an action.

OpenEnv servers shape their observations and actions as they like; env_config
(:class:`OpenEnvConfig`) says how to read them:

* **observation -> messages**: an observation with a ``messages`` list gives those:
  chat messages (``{role, content}``, what ``agentsgym serve`` sends) as they are, and
  messages of other shapes (TextArena's ``{sender_id, content, category}``) as user
  messages of their ``content``. Else ``observation_field`` names the field whose
  value is the user message (text, or JSON of anything else), a dotted path for a
  nested one (``board.log``, ``history.-1``); with ``observation_new_only`` a field
  that holds the whole text so far (a transcript that grows) gives only what was
  added since the previous observation. Else the whole observation, as JSON with
  sorted keys, is the user message.
* **reply -> action**: the reply goes in the action's ``action_field``
  (``message``), with ``action_fields`` added. With ``action_json`` the reply is
  JSON (a fenced ```` ```json ```` block is taken off) and its value goes there
  instead, a dict for an MCP env's ``arguments``; with ``action_field: null`` too,
  the reply is a JSON object whose keys are the action's fields
  (``{"tool_name": ..., "arguments": {...}}``). A reply that is not the JSON asked
  for fails its episode, saying so.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import Field, model_validator

from agentsgym import Messages
from agentsgym_serve.errors import RemoteEnvError
from agentsgym_serve.remote_client import ConversationConfig

_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n?```\s*$", re.DOTALL)


class OpenEnvConfig(ConversationConfig):
    """env_config of an :class:`~agentsgym_serve.openenv_env.OpenEnvEnv`: how to read
    one OpenEnv server (see the module docstring; the conversation, reset, reward,
    dataset and retry keys are :class:`ConversationConfig`'s, and its retry window
    bounds connecting and resets)."""

    observation_field: str | None = Field(
        None,
        description="the observation field that holds the user message (for servers whose "
        "observations carry no 'messages'), a dotted path for a nested one ('board.log'); "
        "unset: the whole observation as JSON",
    )
    observation_new_only: bool = Field(
        False,
        description="observation_field holds the whole text so far (a growing transcript): "
        "the user message is only what was added since the previous observation",
    )
    action_field: str | None = Field(
        "message",
        min_length=1,
        description="the action field that carries the reply; null (with action_json): the "
        "reply is a JSON object whose keys are the action's fields",
    )
    action_json: bool = Field(
        False,
        description="the reply is JSON: its value (a dict for MCP 'arguments') is sent, not "
        "the text",
    )
    action_fields: dict[str, Any] = Field(
        default_factory=dict, description="more fields of every action"
    )
    message_timeout_seconds: float = Field(
        300.0, gt=0, description="the longest wait for one reply of the server"
    )

    @model_validator(mode="after")
    def _whole_action_is_json(self) -> OpenEnvConfig:
        if self.action_field is None and not self.action_json:
            raise ValueError(
                "action_field null sends the reply's JSON object as the action: set "
                "action_json true too (or name the field that carries the reply)"
            )
        if self.observation_new_only and self.observation_field is None:
            raise ValueError(
                "observation_new_only reads a growing text field: set observation_field too"
            )
        return self


def observation_messages(
    observation: dict[str, Any], config: OpenEnvConfig, previous: str
) -> tuple[Messages, str]:
    """The messages of an observation, and the text to compare the next one with (the
    field's whole text, for ``observation_new_only``)."""
    name = config.observation_field
    if name is None:
        messages = observation.get("messages")
        if isinstance(messages, list):
            return [_chat_message(m) for m in messages], ""
        return [{"role": "user", "content": _text(observation)}], ""
    text = _text(_field(observation, name))
    if config.observation_new_only:
        new = text.removeprefix(previous)
        return [{"role": "user", "content": new.lstrip("\n")}], text
    return [{"role": "user", "content": text}], text


def action_of(reply: str, config: OpenEnvConfig) -> dict[str, Any]:
    """The action to send for an agent's reply."""
    value: Any = _json_reply(reply) if config.action_json else reply
    if config.action_field is not None:
        return {**config.action_fields, config.action_field: value}
    if not isinstance(value, dict):
        raise RemoteEnvError(
            f"the reply must be a JSON object of the action's fields (action_field is null), "
            f"got {type(value).__name__}: {reply[:200]!r}"
        )
    return {**config.action_fields, **value}


def _json_reply(reply: str) -> Any:
    fenced = _FENCE.match(reply)
    text = fenced.group(1) if fenced else reply
    try:
        return json.loads(text)
    except ValueError as exc:
        raise RemoteEnvError(
            f"the reply is not JSON (action_json is set: the server takes a JSON value): "
            f"{exc}; the reply began {reply[:200]!r}"
        ) from None


def _chat_message(message: Any) -> dict[str, str]:
    """A chat message as it is; another shape (TextArena's sender_id, content,
    category) as a user message of its content."""
    if isinstance(message, dict) and "role" in message:
        return {"role": str(message["role"]), "content": _text(message.get("content", ""))}
    if isinstance(message, dict) and "content" in message:
        return {"role": "user", "content": _text(message["content"])}
    return {"role": "user", "content": _text(message)}


def _field(observation: dict[str, Any], path: str) -> Any:
    """The value at ``path`` (a key, or a dotted path of keys and list indexes); ``""``
    when the observation has none."""
    if path in observation:
        return observation[path]
    value: Any = observation
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and re.fullmatch(r"-?\d+", part):
            index = int(part)
            if not -len(value) <= index < len(value):
                return ""
            value = value[index]
        else:
            return ""
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)
