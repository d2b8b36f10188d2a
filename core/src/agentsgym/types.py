"""Small value types shared by envs, agents and the runner."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypedDict


class Message(TypedDict, total=False):
    """One chat message, as chat templates and OpenAI-compatible servers take it."""

    role: str
    content: str


Messages = list[Message]


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
    """The rich return of ``Agent.get_action``.

    ``token_ids`` are the ids the model sampled for this reply (with its
    end-of-turn token when it generated one) and go into the trajectory verbatim;
    ``logprobs`` are their sampling log-probabilities. Agents that only have text
    return ``text`` alone (or a plain string).

    ``prompt_token_ids`` are the ids the model was conditioned on, when a server
    reports them (vLLM's ``return_token_ids``); the runner checks them against the
    episode's stream and starts a new segment from them on a mismatch.
    ``truncated`` says the reply was cut at the generation length limit (no
    end-of-turn token sampled).
    """

    text: str
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    prompt_token_ids: list[int] | None = None
    truncated: bool = False

    def __post_init__(self) -> None:
        if self.logprobs is not None and self.token_ids is None:
            raise ValueError("AgentAction.logprobs needs token_ids: they describe those ids")
        if self.logprobs is not None and self.token_ids is not None:
            if len(self.logprobs) != len(self.token_ids):
                raise ValueError(
                    f"AgentAction has {len(self.token_ids)} token_ids but "
                    f"{len(self.logprobs)} logprobs; they must pair up one to one"
                )


@dataclass(frozen=True)
class EpisodeContext:
    """Who is playing what: given to agents that take a ``context`` argument.

    ``get_action(messages, agent_state, *, context)`` receives it on every call of
    an episode. ``seed`` is a per-rollout seed: the same for every episode of one
    trial, different across the rollouts of a task, and the same across runs (it is
    derived from the run seed, the env id, the task and the rollout index), so a
    seeded scripted agent varies across rollouts and repeats exactly across runs.
    """

    session_id: str
    env_id: str
    task_index: int
    rollout_index: int
    episode_index: int
    seed: int
    step: int = 0
