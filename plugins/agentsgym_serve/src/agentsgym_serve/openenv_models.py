"""The action, observation and state of an agentsgym env in OpenEnv's protocol.

They subclass openenv-core's own pydantic models (``openenv.core.env_server.types``),
so ``GET /schema`` publishes what openenv's clients and tools expect, and an
openenv-core client may parse replies with them:

* :class:`AgentsgymAction`: ``{"message": str}``, the agent's reply text (OpenEnv's
  text envs call it ``message`` too), optionally with the sampled ``token_ids``,
  ``truncated`` (the reply was cut at the length limit) and ``tool_calls`` (a tool
  env answers them; without them it reads calls out of the message);
* :class:`AgentsgymObservation`: the new chat ``messages`` (the episode's first prompt
  after a reset, the next prompt after a step, empty once the episode is over), the
  same as one ``text``, the episode's first ``prompt`` (on every observation), the
  env's own ``step_reward``, its ``reward_terms`` (``reward_shaping``) and, on an
  episode's last step, its ``finish_terms`` (``finish_episode``), ``truncated`` (the
  step limit ended it), the step's ``info``, and the ``episode``/``step`` counters. The protocol's ``reward`` is the step's whole
  reward (``step_reward`` + the terms), and ``done`` says the episode is over;
* :class:`AgentsgymState`: the episode as the agent saw it;
* :class:`TextArenaObservation`: the observation shape of OpenEnv's text envs (a
  cumulative transcript in ``messages[0].content``, and a ``prompt``), which a server
  sends instead when started with ``--observation textarena``.

openenv-core is the optional dependency ``agentsgym-serve[openenv]``; importing this
module without it raises :class:`ImportError` saying so.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

try:
    from openenv.core.env_server.types import Action, Observation, State
except ImportError as exc:  # pragma: no cover (the extra is installed in the tests)
    raise ImportError(
        "OpenEnv's protocol needs openenv-core: pip install -e './plugins/agentsgym_serve[openenv]' in a clone"
    ) from exc

__all__ = [
    "OBSERVATION_SHAPES",
    "AgentsgymAction",
    "AgentsgymObservation",
    "AgentsgymState",
    "TextArenaMessage",
    "TextArenaObservation",
]

OBSERVATION_SHAPES = ("agentsgym", "textarena")
"""The observation shapes a server sends (``agentsgym serve --observation``)."""


class AgentsgymAction(Action):
    """One agent reply."""

    message: str = Field(description="the agent's reply text, exactly as generated")
    token_ids: list[int] | None = Field(None, description="the sampled token ids, if any")
    truncated: bool = Field(False, description="the reply was cut at the length limit")
    tool_calls: list[dict[str, Any]] | None = Field(
        None,
        description="the reply's tool calls, as a chat server parsed them (OpenAI's form); "
        "without them, a tool env reads calls out of the message",
    )


class AgentsgymObservation(Observation):
    """What a reset or a step returns (``reward`` and ``done`` travel beside it)."""

    messages: list[dict[str, Any]] = Field(
        default_factory=list,
        description="chat messages ({role, content}): the first prompt after a reset (a "
        "system message included), the next prompt after a step (a tool call's: the tool "
        "results, role tool); empty once over",
    )
    text: str = Field("", description="the messages' contents joined by blank lines")
    prompt: str = Field(
        "",
        description="the episode's first prompt (its messages' contents joined by blank "
        "lines), on every observation of the episode, as OpenEnv's text envs send theirs",
    )
    step_reward: float = Field(0.0, description="the env's step reward, without the terms")
    reward_terms: dict[str, float] = Field(
        default_factory=dict, description="reward_shaping terms of this step, by name"
    )
    finish_terms: dict[str, float] = Field(
        default_factory=dict,
        description="finish_episode terms, on the step that ended the episode",
    )
    truncated: bool = Field(False, description="the step limit ended the episode")
    info: dict[str, Any] = Field(default_factory=dict, description="the step's info")
    episode: int = Field(0, description="the episode's number in this session, from 1")
    step: int = Field(0, description="actions applied in this episode")


class TextArenaMessage(BaseModel):
    """One message of a TextArena-shaped observation, as OpenEnv's ``textarena_env``
    writes them (``sender_id`` -1 is the game)."""

    sender_id: int = Field(-1, description="-1: the game (the env)")
    content: str = Field("", description="the text")
    category: str = Field("MESSAGE", description="TextArena's observation type")


class TextArenaObservation(Observation):
    """The observation of OpenEnv's text envs (``textarena_env``: Wordle, ...), which
    TRL's OpenEnv examples read (``agentsgym serve --observation textarena``).

    ``messages`` is one message whose ``content`` is the episode's transcript so far,
    each step's new text appended after a blank line (the first prompt, then each
    step's next prompt or tool results; the agent's own replies are not in it), so a
    client takes the new part as what follows the previous content. ``prompt`` is the
    episode's first prompt. What agentsgym's own shape carries besides (the chat
    messages with their roles, reward terms, truncation, counters) is in ``metadata``.
    """

    prompt: str = Field("", description="the episode's first prompt")
    messages: list[TextArenaMessage] = Field(
        default_factory=list, description="one message: the episode's transcript so far"
    )
    current_player_id: int = Field(0, description="always 0: one agent plays")
    legal_players: list[int] = Field(default_factory=lambda: [0], description="[0]")
    info: dict[str, Any] = Field(default_factory=dict, description="the step's info")


class AgentsgymState(State):
    """The session's current episode (``episode_id`` is the id the env's hooks see)."""

    env_id: str = Field("", description="the served env's id")
    episode: int = Field(0, description="the episode's number in this session (0: none yet)")
    done: bool = Field(False, description="the episode is over")
    truncated: bool = Field(False, description="the step limit ended it")
    messages: list[dict[str, Any]] = Field(
        default_factory=list,
        description="the whole conversation of this episode (tool calls and results included)",
    )
