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
    """

    text: str
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.logprobs is not None and self.token_ids is None:
            raise ValueError("AgentAction.logprobs needs token_ids: they describe those ids")
        if self.logprobs is not None and self.token_ids is not None:
            if len(self.logprobs) != len(self.token_ids):
                raise ValueError(
                    f"AgentAction has {len(self.token_ids)} token_ids but "
                    f"{len(self.logprobs)} logprobs; they must pair up one to one"
                )
