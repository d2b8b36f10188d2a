"""One viewed episode: a rollout or eval row normalised for display.

Rollout files (``agentsgym rollout --out``, rows of ``Episode.to_record`` /
``TrajectoryBatch.to_records``) and eval files (``agentsgym eval --out``, rows of
``evaluation.Sample``) share most fields; a :class:`ViewedEpisode` holds the union,
with ``None`` where a file kind has no value (eval rows have no tokens, rollout rows
no ``correct``). Rows are validated here, at the boundary, so that the terminal view
and the HTML page can trust every field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

FileKind = Literal["rollout", "eval"]


class ViewedMessage(BaseModel):
    """One chat message; non-string content (multimodal parts) is shown as JSON."""

    model_config = ConfigDict(frozen=True)

    role: str
    content: str

    @field_validator("content", mode="before")
    @classmethod
    def _content_as_text(cls, value: Any) -> str:
        if value is None:
            return ""
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class ViewedStep:
    """What the file records about one agent action (the step after an assistant turn)."""

    index: int
    info: dict[str, Any]
    reward: float | None
    """The step reward (env reward plus terms), when the file records it."""
    reward_terms: dict[str, float]


@dataclass(frozen=True, eq=False)
class TokenFields:
    """The unpadded token fields of one row: ids, agent mask and per-token rewards.

    Held as numpy arrays (17 bytes a token rather than about 80 as Python lists), so
    that files of millions of tokens load in little memory.
    """

    ids: np.ndarray
    """int64 token ids."""
    agent_mask: np.ndarray
    """uint8, 1 on the tokens the agent generated."""
    rewards: np.ndarray
    """float64 per-token rewards."""

    @classmethod
    def from_values(cls, ids: Any, agent_mask: Any, rewards: Any) -> TokenFields:
        """Check and convert three sequences; ValueError says what is wrong."""
        try:
            id_array = np.asarray(ids, dtype=np.int64)
            mask_array = np.asarray(agent_mask, dtype=np.int64)
            reward_array = np.asarray(rewards, dtype=np.float64)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ValueError(f"token fields of the wrong type ({exc})") from None
        if not id_array.ndim == mask_array.ndim == reward_array.ndim == 1:
            raise ValueError("token fields must be flat lists")
        if not len(id_array) == len(mask_array) == len(reward_array):
            raise ValueError(
                f"token ids ({len(id_array)}), agent mask ({len(mask_array)}) and per-token "
                f"rewards ({len(reward_array)}) have different lengths"
            )
        if mask_array.size and not np.isin(mask_array, (0, 1)).all():
            raise ValueError("the agent mask holds values other than 0 and 1")
        return cls(id_array, mask_array.astype(np.uint8), reward_array)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def num_agent_tokens(self) -> int:
        return int(self.agent_mask.sum())

    def agent_runs(self) -> list[tuple[int, int]]:
        """``(start, end)`` of every maximal run of agent tokens, in order."""
        edges = np.diff(np.concatenate(([0], self.agent_mask.astype(np.int8), [0])))
        starts = np.flatnonzero(edges == 1)
        ends = np.flatnonzero(edges == -1)
        return [(int(s), int(e)) for s, e in zip(starts, ends)]


class ViewedEpisode(BaseModel):
    """One row of a rollout or eval file, ready to show."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: int = Field(description="0-based row number in the file (shown as #N)")
    kind: FileKind
    env_id: str | None = None
    session_id: str | None = None
    task_index: int | None = None
    rollout_index: int | None = None
    episode_index: int | None = None
    group_index: int | None = None
    segment_index: int | None = None
    num_segments: int | None = None
    task_data: dict[str, Any] = Field(default_factory=dict)
    final_reward: float = 0.0
    num_turns: int = 0
    truncated: bool = False
    free_shot: bool = False
    error: str | None = None
    correct: bool | None = None
    answer: str | None = None
    graded: bool | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    messages: list[ViewedMessage] = Field(default_factory=list)
    step_infos: list[dict[str, Any]] = Field(default_factory=list)
    step_rewards: list[float] | None = None
    step_reward_terms: list[dict[str, float]] | None = None
    tokens: TokenFields | None = None

    @field_validator("task_data", "metrics", mode="before")
    @classmethod
    def _none_as_empty_dict(cls, value: Any) -> Any:
        return {} if value is None else value

    @field_validator("messages", "step_infos", mode="before")
    @classmethod
    def _none_as_empty_list(cls, value: Any) -> Any:
        return [] if value is None else value

    @field_validator("answer", mode="before")
    @classmethod
    def _answer_as_text(cls, value: Any) -> Any:
        if value is None or isinstance(value, str):
            return value
        return json.dumps(value, ensure_ascii=False, sort_keys=True)

    @property
    def failed(self) -> bool:
        """The episode ended with an error (an exception in the env or the agent)."""
        return self.error is not None

    @property
    def task_json(self) -> str:
        """``task_data`` as one line of JSON (shown, and searched, as this text)."""
        return json.dumps(self.task_data, ensure_ascii=False, sort_keys=True, default=str)

    def steps(self) -> list[ViewedStep]:
        """One :class:`ViewedStep` per recorded step, rewards included when recorded."""
        count = max(len(self.step_infos), len(self.step_rewards or []))
        steps = []
        for i in range(count):
            rewards = self.step_rewards or []
            terms = self.step_reward_terms or []
            steps.append(
                ViewedStep(
                    index=i,
                    info=self.step_infos[i] if i < len(self.step_infos) else {},
                    reward=rewards[i] if i < len(rewards) else None,
                    reward_terms=terms[i] if i < len(terms) else {},
                )
            )
        return steps

    def episode_reward_terms(self) -> dict[str, float]:
        """The episode's reward split by source: ``reward/<name>`` metrics, summed."""
        return {
            k.removeprefix("reward/"): v for k, v in self.metrics.items() if k.startswith("reward/")
        }

    def turn_token_spans(self) -> list[tuple[int, int]] | None:
        """The token span of each assistant message, or None when they cannot be matched.

        Agent tokens form one run per agent action; the runs map to the assistant
        messages in order when the row holds the episode's only segment and the counts
        agree (a split episode's row holds one view of the conversation).
        """
        if self.tokens is None or (self.num_segments or 1) != 1:
            return None
        runs = self.tokens.agent_runs()
        assistants = sum(1 for m in self.messages if m.role == "assistant")
        return runs if len(runs) == assistants else None

    def turn_token_rewards(self) -> list[float] | None:
        """Per assistant message, the reward its tokens carry (what a trainer sees)."""
        spans = self.turn_token_spans()
        if spans is None or self.tokens is None:
            return None
        return [float(self.tokens.rewards[s:e].sum()) for s, e in spans]

    def search_text(self) -> str:
        """The lower-cased text ``--search`` looks in (the HTML page builds the same)."""
        parts = [self.env_id or "", self.session_id or "", self.error or "", self.task_json]
        parts += [m.content for m in self.messages]
        return "\n".join(parts).lower()
