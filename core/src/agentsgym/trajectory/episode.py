"""StepRecord and Episode: one played episode, unpadded, with compact token fields."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentsgym.errors import TokenFidelityError, TokenizerRequiredError
from agentsgym.trajectory.segment import TokenSegment
from agentsgym.types import Messages

REWARD_TOLERANCE = 1e-4
"""Relative tolerance of the reward-conservation check: float32 per-token rewards,
summed in float64, meet the final reward far closer than this."""


@dataclass
class StepRecord:
    """One agent action and what the env made of it."""

    action: str
    reward: float
    done: bool
    info: dict[str, Any] = field(default_factory=dict)
    reward_terms: dict[str, float] = field(default_factory=dict)
    num_agent_tokens: int = 0
    token_source: str | None = None
    """Where the action's token ids came from: ``"sampled"`` (from the episode's own
    prompt ids), ``"server"`` (its reported prompt ids checked), ``"unchecked"`` (ids
    without their prompt), ``"retokenized"`` (text only), ``None`` without a tokenizer."""
    reply_truncated: bool = False
    """The reply was cut at the agent's generation length limit."""
    token_span: tuple[int, int, int] | None = None
    """``(segment, start, end)`` of the action's agent tokens in ``episode.segments``; the
    ids before ``start`` are the prompt the model replied to. ``None`` without a tokenizer."""
    policy_version: int | None = None
    """The version of the weights that generated the action (``AgentAction.policy_version``);
    ``None`` when the agent could not say."""
    policy_versions: list[int] | None = None
    """One version per agent token of ``token_span``, for a reply whose tokens were
    sampled by different weights (``AgentAction.policy_versions``). Kept only when the
    reply's sampled ids went into the stream as they are, one token per version: a
    re-tokenized reply has other tokens, which all take ``policy_version``."""

    def __post_init__(self) -> None:
        if self.policy_versions is None:
            return
        span = self.token_span
        if span is None or span[2] - span[1] != len(self.policy_versions):
            self.policy_versions = None

    def token_versions(self) -> list[int] | None:
        """The version of each agent token of ``token_span`` (``None``: no known version)."""
        if self.token_span is None or self.policy_version is None:
            return None
        if self.policy_versions is not None:
            return list(self.policy_versions)
        return [self.policy_version] * (self.token_span[2] - self.token_span[1])


@dataclass
class Episode:
    """One played episode, unpadded: ``segments`` holds one :class:`TokenSegment` per
    view the model saw (one unless a non-prefix-preserving template split the episode),
    ``segment_rewards`` their float32 rewards; ``full_token_ids`` etc. copy the single
    segment into plain lists."""

    session_id: str
    env_id: str
    task_data: dict[str, Any]
    messages: Messages = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    final_reward: float = 0.0
    metrics: dict[str, float] = field(default_factory=dict)
    truncated: bool = False
    error: str | None = None
    free_shot: bool = False
    task_index: int = 0
    rollout_index: int = 0
    episode_index: int = 0
    segments: list[TokenSegment] = field(default_factory=list)
    segment_rewards: list[np.ndarray] = field(default_factory=list)
    tokenized: bool = False
    has_logprobs: bool = False
    agent_state: Any = field(default=None, repr=False)
    role: str | None = None
    """The role this episode is the view of, in an env with several (``None``: one agent).
    Its messages, steps, tokens and rewards are that role's alone."""

    @property
    def num_turns(self) -> int:
        return len(self.steps)

    @property
    def ok(self) -> bool:
        return self.error is None

    def _single_segment(self) -> TokenSegment:
        if not self.tokenized:
            raise TokenizerRequiredError(
                "this episode was played without a tokenizer, so it has no token fields; "
                "build the env with a tokenizer (agentsgym.make(id, tokenizer=...))"
            )
        if len(self.segments) != 1:
            raise TokenFidelityError(
                f"episode {self.session_id} was split into {len(self.segments)} segments "
                "because the chat template is not prefix-preserving; read episode.segments"
            )
        return self.segments[0]

    @property
    def full_token_ids(self) -> list[int]:
        return self._single_segment().token_ids.tolist()  # type: ignore[no-any-return]

    @property
    def full_attention_mask(self) -> list[int]:
        return [1] * len(self._single_segment())

    @property
    def agent_token_mask(self) -> list[int]:
        return self._single_segment().agent_mask.tolist()  # type: ignore[no-any-return]

    @property
    def per_token_rewards(self) -> list[float]:
        self._single_segment()
        return self.segment_rewards[0].tolist()  # type: ignore[no-any-return]

    @property
    def sampled_logprobs(self) -> list[float] | None:
        logprobs = self._single_segment().logprobs
        return logprobs.tolist() if self.has_logprobs and logprobs is not None else None

    @property
    def num_tokens(self) -> int:
        return sum(len(s) for s in self.segments)

    @property
    def policy_versions(self) -> list[int | None]:
        """Per step, the policy version that generated its action."""
        return [s.policy_version for s in self.steps]

    @property
    def min_policy_version(self) -> int | None:
        """The oldest policy version among the episode's actions; ``None`` when any action
        has no version (its age cannot be known) or there is no action."""
        versions = self.policy_versions
        if not versions or any(v is None for v in versions):
            return None
        return min(v for v in versions if v is not None)

    @property
    def max_policy_version(self) -> int | None:
        """The newest policy version among the episode's actions (``None``: none known)."""
        return max((v for v in self.policy_versions if v is not None), default=None)

    @property
    def num_agent_tokens(self) -> int:
        return sum(s.num_agent_tokens for s in self.segments)

    def token_policy_versions(self, index: int = 0) -> np.ndarray:
        """The policy version of every token of segment ``index`` (``-1``: unknown, env
        tokens included); what the rows' ``per_token_policy_versions`` hold."""
        return segment_versions(self, index)

    @property
    def nbytes(self) -> int:
        """Bytes held by the token fields (ids, masks, logprobs, rewards)."""
        return sum(s.nbytes for s in self.segments) + sum(r.nbytes for r in self.segment_rewards)

    def check(self) -> None:
        """Raise TokenFidelityError unless lengths agree, the 0/1 mask covers exactly the
        agent's tokens, which alone carry rewards, and those add up to the final reward."""
        if not self.tokenized:
            return
        if len(self.segment_rewards) != len(self.segments):
            raise TokenFidelityError(f"{self.session_id}: rewards for a missing segment")
        for index, (segment, rewards) in enumerate(zip(self.segments, self.segment_rewards)):
            if len(rewards) != len(segment):
                raise TokenFidelityError(
                    f"{self.session_id} segment {index}: {len(segment)} tokens but "
                    f"{len(rewards)} rewards"
                )
            mask = segment.agent_mask
            if mask.size and int(mask.max()) > 1:
                raise TokenFidelityError(f"{self.session_id}: agent mask value {int(mask.max())}")
            stray = np.flatnonzero((mask == 0) & (rewards != 0.0))
            if stray.size:
                pos = int(stray[0])
                raise TokenFidelityError(
                    f"{self.session_id} segment {index}: env token {pos} carries reward "
                    f"{float(rewards[pos])}"
                )
        generated = sum(s.num_agent_tokens for s in self.steps)
        if generated != self.num_agent_tokens:
            raise TokenFidelityError(
                f"{self.session_id}: agent mask covers {self.num_agent_tokens} tokens but the "
                f"agent produced {generated}"
            )
        on_tokens = math.fsum(float(r.sum(dtype=np.float64)) for r in self.segment_rewards)
        scale = max(1.0, abs(self.final_reward), math.fsum(abs(s.reward) for s in self.steps))
        if abs(on_tokens - self.final_reward) > REWARD_TOLERANCE * scale:
            raise TokenFidelityError(
                f"{self.session_id}: a step reward was lost: the per-token rewards add up to "
                f"{on_tokens:.6g} but the episode earned {self.final_reward:.6g}"
                + (" and has no agent token to carry it" if not self.num_agent_tokens else "")
            )

    def to_record(self, *, token_fields: bool = True) -> dict[str, Any]:
        """A flat, JSON-friendly row (unpadded token fields of the first segment; ``None``
        without ``token_fields``). A role's episode has a ``role`` column; a single-agent
        episode's row has none, as before roles existed."""
        tokens = self.tokenized and bool(self.segments)
        role = {"role": self.role} if self.role is not None else {}
        return {
            **role,
            "session_id": self.session_id,
            "env_id": self.env_id,
            "task_index": self.task_index,
            "rollout_index": self.rollout_index,
            "episode_index": self.episode_index,
            "task_data": self.task_data,
            "final_reward": self.final_reward,
            "num_turns": self.num_turns,
            "truncated": self.truncated,
            "free_shot": self.free_shot,
            "error": self.error,
            "metrics": self.metrics,
            "messages": self.messages,
            "step_infos": [s.info for s in self.steps],
            "step_rewards": [s.reward for s in self.steps],
            "step_reward_terms": [dict(s.reward_terms) for s in self.steps],
            "step_token_sources": [s.token_source for s in self.steps],
            "step_policy_versions": self.policy_versions,
            "min_policy_version": self.min_policy_version,
            "max_policy_version": self.max_policy_version,
            "num_segments": len(self.segments),
            **(segment_fields(self, 0) if tokens and token_fields else dict.fromkeys(SEGMENT_FIELDS)),
            "num_tokens": self.num_tokens if tokens else None,
            "num_agent_tokens": self.num_agent_tokens if tokens else None,
        }


SEGMENT_FIELDS = (
    "full_token_ids",
    "full_attention_mask",
    "agent_token_mask",
    "per_token_rewards",
    "per_token_policy_versions",
)

UNKNOWN_VERSION = -1
"""The policy version of tokens without a known version (env tokens included)."""


def segment_versions(episode: Episode, index: int) -> np.ndarray:
    """The policy version of every token of one segment: each agent token's (per token
    when its reply reported one per token), ``UNKNOWN_VERSION`` on env tokens and on
    tokens whose agent could not say."""
    versions = np.full(len(episode.segments[index]), UNKNOWN_VERSION, dtype=np.int64)
    for step in episode.steps:
        span = step.token_span
        if span is None or span[0] != index:
            continue
        known = step.token_versions()
        if known is not None:
            versions[span[1] : span[2]] = known
    return versions


def segment_arrays(episode: Episode, index: int) -> dict[str, np.ndarray]:
    """The record fields of one segment, as the arrays the episode holds."""
    segment = episode.segments[index]
    return {
        "full_token_ids": segment.token_ids,
        "full_attention_mask": np.ones(len(segment), dtype=np.uint8),
        "agent_token_mask": segment.agent_mask,
        "per_token_rewards": episode.segment_rewards[index],
        "per_token_policy_versions": segment_versions(episode, index),
    }


def segment_fields(episode: Episode, index: int) -> dict[str, Any]:
    """The record fields of one segment, as lists (JSON, datasets)."""
    return {name: array.tolist() for name, array in segment_arrays(episode, index).items()}
