"""Small value types shared by envs, agents and the runner."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypedDict

__all__ = [
    "TOOL_ERROR_PREFIX",
    "TRUNCATED_KEY",
    "AgentAction",
    "EpisodeContext",
    "Message",
    "Messages",
    "RewardTerm",
    "Role",
    "StepResult",
]


class Message(TypedDict, total=False):
    """One chat message, as chat templates and OpenAI-compatible servers take it."""

    role: str
    content: str
    tool_calls: list[dict[str, Any]]  # an assistant's calls, OpenAI's form
    tool_call_id: str  # a ``tool`` message: the call it answers
    name: str  # a ``tool`` message: the tool's name


Messages = list[Message]

TOOL_ERROR_PREFIX = "Error: "
"""How a tool message that reports a failure begins, the reason after it (a call that
could not be read, bad arguments, a tool that raised): the model reads it, and a server
that answers tool calls over another protocol (OpenEnv's ``/mcp``) reports it as an
error."""


TRUNCATED_KEY = "truncated"
"""A step's info key: ``True`` says the env cut the episode short at this step, without
finishing it (a remote server at its step limit); the episode ends there, recorded as
truncated as at ``max_steps_per_episode`` (the key itself is not kept in the step's info)."""


class StepResult(NamedTuple):
    """What ``step_episode`` returns; a plain 4-tuple is accepted too."""

    state: Any
    reward: float
    done: bool
    info: dict[str, Any]


class RewardTerm(NamedTuple):
    """A named reward term returned by a ``reward_shaping`` implementation."""

    name: str
    value: float


@dataclass
class AgentAction:
    """The rich return of ``Agent.get_action`` (agents with only text return ``text``).

    ``token_ids`` are the ids the model sampled (with its end-of-turn token when it made
    one), put into the trajectory verbatim; ``logprobs`` are their log-probabilities.
    ``prompt_token_ids``, when a server reports them, are the ids the model was
    conditioned on: the runner starts a new segment from them if they differ from the
    episode's stream. ``truncated``: the reply was cut at the generation length limit.
    ``tool_calls``: the calls a chat server parsed out of the reply (OpenAI's form).
    ``policy_version``: the version of the weights that generated the reply (a counter
    the trainer bumps at each weight update); ``None`` when the agent cannot say.
    ``policy_versions``: one version per id of ``token_ids``, for a reply whose tokens
    were sampled by different weights (an inference engine updated in place while the
    reply was generated: vLLM reports each token's version); ``policy_version`` is then
    the oldest of them, which is what a staleness bound must look at.
    """

    text: str
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    prompt_token_ids: list[int] | None = None
    truncated: bool = False
    tool_calls: list[dict[str, Any]] | None = None
    policy_version: int | None = None
    policy_versions: list[int] | None = None

    def __post_init__(self) -> None:
        if self.policy_versions is not None:
            if self.token_ids is None or len(self.policy_versions) != len(self.token_ids):
                raise ValueError(
                    f"AgentAction has {len(self.token_ids or ())} token_ids but "
                    f"{len(self.policy_versions)} policy_versions; they must pair up one to one"
                )
            if self.policy_version is None and self.policy_versions:
                self.policy_version = min(self.policy_versions)
        if self.logprobs is None:
            return
        if self.token_ids is None:
            raise ValueError("AgentAction.logprobs needs token_ids: they describe those ids")
        if len(self.logprobs) != len(self.token_ids):
            raise ValueError(
                f"AgentAction has {len(self.token_ids)} token_ids but "
                f"{len(self.logprobs)} logprobs; they must pair up one to one"
            )


@dataclass(frozen=True)
class EpisodeContext:
    """Who is playing what: given on every call of an episode to agents whose
    ``get_action`` takes a ``context`` argument. ``seed`` is per rollout: the same for
    every episode of one trial and across runs, different across the rollouts of a task
    (docs/plugin-authors.md). ``tools``: the episode's tool schemas, if it has tools;
    ``role``: the role being played, in an env with roles."""

    session_id: str
    env_id: str
    task_index: int
    rollout_index: int
    episode_index: int
    seed: int
    step: int = 0
    tools: tuple[dict[str, Any], ...] = field(default=(), hash=False)  # dicts: unhashable
    role: str | None = None
    """The role this agent plays, in an env with several (``None``: the only agent)."""


@dataclass(frozen=True)
class Role:
    """One of the agents of an env with several (``MultistepEnv.roles``): a two-player
    game's seats, a questioner and its answerer. Each role has its own agent, its own
    conversation and token stream, and its own rewards.

    ``name``: what ``turn_role`` returns and ``--agent NAME=AGENT`` names (no ``/``:
    env ids have one). ``trainable``: its episodes go into training batches (a scripted
    or frozen opponent's do not). ``description``: one line for ``describe``.
    ``default_agent``: the registered agent that plays this role when the command line
    names no agent for it nor for the env (a scripted opponent's, say). ``private``: the
    ``task_data`` keys only this role may see (its hidden card, its cost): a server never
    sends them to a client of another role (``MultistepEnv.task_for_role``).
    """

    name: str
    trainable: bool = True
    description: str = ""
    default_agent: str | None = None
    private: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name or "=" in self.name or "." in self.name:
            raise ValueError(
                f"role name {self.name!r} must be a non-empty name without '/', '=' or '.' "
                "(--agent ROLE=NAME and --agent-option ROLE.key=value parse them)"
            )
        if isinstance(self.private, str) or not all(
            isinstance(key, str) and key for key in self.private
        ):
            raise ValueError(
                f"role {self.name!r}: private must be a tuple of task_data keys, got "
                f"{self.private!r}"
            )
        object.__setattr__(self, "private", tuple(self.private))
