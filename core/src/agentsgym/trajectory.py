"""Episode, TrajectoryGroup and TrajectoryBatch: what the runner hands to trainers.

An :class:`Episode` is unpadded. A :class:`TrajectoryGroup` holds the rollouts of one
task and pads them to the group's longest rollout (pad id from the tokenizer, masks
0, rewards 0.0). A :class:`TrajectoryBatch` concatenates groups and converts to torch
tensors or to a ``datasets.Dataset``.

Rows are (episode, segment) pairs: an episode is one row unless a template that is
not prefix-preserving split it into several views (see :mod:`agentsgym.tokenization`).
Failed episodes are kept on their group (``group.failed``) with their error, never in
the padded rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from agentsgym.errors import TokenFidelityError, TokenizerRequiredError
from agentsgym.tokenization import TokenSegment
from agentsgym.types import Messages

if TYPE_CHECKING:
    import datasets
    import torch


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
    """Where the action's token ids came from: ``"sampled"`` (ids the model generated
    from the episode's own prompt ids), ``"server"`` (ids a server generated, its
    reported prompt ids checked against the stream), ``"retokenized"`` (text only:
    the reply was tokenized by the runner), or ``None`` without a tokenizer."""
    reply_truncated: bool = False
    """The reply was cut at the agent's generation length limit."""


@dataclass
class Episode:
    """One played episode, unpadded."""

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
    segment_rewards: list[list[float]] = field(default_factory=list)
    tokenized: bool = False
    has_logprobs: bool = False
    agent_state: Any = field(default=None, repr=False)

    @property
    def num_turns(self) -> int:
        return len(self.steps)

    @property
    def ok(self) -> bool:
        return self.error is None

    # ------------------------------------------------------------ token fields
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
        return self._single_segment().token_ids

    @property
    def full_attention_mask(self) -> list[int]:
        return [1] * len(self._single_segment())

    @property
    def agent_token_mask(self) -> list[int]:
        return self._single_segment().agent_mask

    @property
    def per_token_rewards(self) -> list[float]:
        self._single_segment()
        return self.segment_rewards[0]

    @property
    def sampled_logprobs(self) -> list[float] | None:
        return self._single_segment().logprobs if self.has_logprobs else None

    @property
    def num_tokens(self) -> int:
        return sum(len(s) for s in self.segments)

    @property
    def num_agent_tokens(self) -> int:
        return sum(sum(s.agent_mask) for s in self.segments)

    def check(self) -> None:
        """Token-fidelity invariants; raises TokenFidelityError when one breaks."""
        if not self.tokenized:
            return
        if len(self.segment_rewards) != len(self.segments):
            raise TokenFidelityError(f"{self.session_id}: rewards for a missing segment")
        for index, (segment, rewards) in enumerate(zip(self.segments, self.segment_rewards)):
            n = len(segment.token_ids)
            lengths = {n, len(segment.agent_mask), len(segment.logprobs), len(rewards)}
            if len(lengths) != 1:
                raise TokenFidelityError(
                    f"{self.session_id} segment {index}: ids, mask, logprobs and rewards "
                    f"have different lengths {sorted(lengths)}"
                )
            for pos, (mask, reward) in enumerate(zip(segment.agent_mask, rewards)):
                if mask not in (0, 1):
                    raise TokenFidelityError(f"{self.session_id}: agent mask value {mask}")
                if mask == 0 and reward != 0.0:
                    raise TokenFidelityError(
                        f"{self.session_id} segment {index}: env token {pos} carries reward {reward}"
                    )
        generated = sum(s.num_agent_tokens for s in self.steps)
        if generated != self.num_agent_tokens:
            raise TokenFidelityError(
                f"{self.session_id}: agent mask covers {self.num_agent_tokens} tokens but the "
                f"agent produced {generated}"
            )

    def to_record(self) -> dict[str, Any]:
        """A flat, JSON-friendly row (unpadded token fields of the first segment)."""
        record: dict[str, Any] = {
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
            "num_segments": len(self.segments),
            "full_token_ids": None,
            "full_attention_mask": None,
            "agent_token_mask": None,
            "per_token_rewards": None,
            "num_tokens": None,
            "num_agent_tokens": None,
        }
        if self.tokenized and self.segments:
            first = self.segments[0]
            record.update(
                full_token_ids=first.token_ids,
                full_attention_mask=[1] * len(first),
                agent_token_mask=first.agent_mask,
                per_token_rewards=self.segment_rewards[0],
                num_tokens=self.num_tokens,
                num_agent_tokens=self.num_agent_tokens,
            )
        return record


@dataclass
class TrajectoryGroup:
    """The rollouts of one task, padded to the group's longest row."""

    task_index: int
    task_data: dict[str, Any]
    env_id: str
    trials: list[list[Episode]]
    pad_token_id: int | None
    tokenized: bool

    @cached_property
    def episodes(self) -> list[Episode]:
        """The scored (final) episode of every trial that completed."""
        return [trial[-1] for trial in self.trials if trial and all(e.ok for e in trial)]

    @cached_property
    def failed(self) -> list[Episode]:
        return [e for trial in self.trials for e in trial if not e.ok]

    @cached_property
    def rows(self) -> list[tuple[Episode, int]]:
        """(episode, segment index) of every padded row; one per episode unless split."""
        if not self.tokenized:
            return [(e, 0) for e in self.episodes]
        return [(e, i) for e in self.episodes for i in range(len(e.segments))]

    @cached_property
    def padded_length(self) -> int:
        self._require_tokens()
        return max((len(e.segments[i]) for e, i in self.rows), default=0)

    def _require_tokens(self) -> None:
        if not self.tokenized:
            raise TokenizerRequiredError(
                "these rollouts were played without a tokenizer, so they have no token "
                "fields; a trainer needs them: build the env with a tokenizer"
            )

    def _token_rows(self) -> list[tuple[TokenSegment, list[float]]]:
        self._require_tokens()
        return [(e.segments[i], e.segment_rewards[i]) for e, i in self.rows]

    def _pad(self, values: list[Any], fill: Any) -> list[Any]:
        return values + [fill] * (self.padded_length - len(values))

    @property
    def padded_full_token_ids(self) -> list[list[int]]:
        pad = self.pad_token_id if self.pad_token_id is not None else 0
        return [self._pad(seg.token_ids, pad) for seg, _ in self._token_rows()]

    @property
    def padded_full_attention_mask(self) -> list[list[int]]:
        return [self._pad([1] * len(seg), 0) for seg, _ in self._token_rows()]

    @property
    def padded_agent_token_mask(self) -> list[list[int]]:
        return [self._pad(seg.agent_mask, 0) for seg, _ in self._token_rows()]

    @property
    def padded_per_token_rewards(self) -> list[list[float]]:
        return [self._pad(rewards, 0.0) for _, rewards in self._token_rows()]

    @property
    def padded_sampled_logprobs(self) -> list[list[float]]:
        return [self._pad(seg.logprobs, 0.0) for seg, _ in self._token_rows()]


class TrajectoryBatch:
    """Groups of padded rollouts, row-aligned across every field."""

    def __init__(self, groups: list[TrajectoryGroup]) -> None:
        self.groups = groups

    def __len__(self) -> int:
        return sum(len(g.rows) for g in self.groups)

    def _rows(self) -> list[tuple[int, Episode, int]]:
        return [(gi, e, si) for gi, g in enumerate(self.groups) for e, si in g.rows]

    def _concat(self, name: str) -> list[Any]:
        return [row for g in self.groups for row in getattr(g, name)]

    @property
    def tokenized(self) -> bool:
        return all(g.tokenized for g in self.groups)

    @property
    def padded_full_token_ids(self) -> list[list[int]]:
        return self._concat("padded_full_token_ids")

    @property
    def padded_full_attention_mask(self) -> list[list[int]]:
        return self._concat("padded_full_attention_mask")

    @property
    def padded_agent_token_mask(self) -> list[list[int]]:
        return self._concat("padded_agent_token_mask")

    @property
    def padded_per_token_rewards(self) -> list[list[float]]:
        return self._concat("padded_per_token_rewards")

    @property
    def padded_sampled_logprobs(self) -> list[list[float]]:
        return self._concat("padded_sampled_logprobs")

    @property
    def final_rewards(self) -> list[float]:
        return [e.final_reward for _, e, _ in self._rows()]

    @property
    def session_ids(self) -> list[str]:
        return [e.session_id for _, e, _ in self._rows()]

    @property
    def group_indices(self) -> list[int]:
        return [gi for gi, _, _ in self._rows()]

    @property
    def segment_indices(self) -> list[int]:
        return [si for _, _, si in self._rows()]

    @property
    def final_completion_messages(self) -> list[Messages]:
        return [e.messages for _, e, _ in self._rows()]

    @property
    def episodes(self) -> list[Episode]:
        """The scored episode behind each row."""
        return [e for _, e, _ in self._rows()]

    @property
    def all_episodes(self) -> list[Episode]:
        """Every episode played, including free shots and failures, for logging."""
        return [e for g in self.groups for trial in g.trials for e in trial]

    @property
    def failed(self) -> list[Episode]:
        return [e for g in self.groups for e in g.failed]

    def to_torch(self) -> dict[str, torch.Tensor]:
        """Tensors of the padded fields, right-padded further to the batch's longest row."""
        import torch

        for group in self.groups:
            group._require_tokens()
        width = max((g.padded_length for g in self.groups), default=0)
        pad_id = next((g.pad_token_id for g in self.groups if g.pad_token_id is not None), 0)

        def widen(rows: list[list[Any]], fill: Any) -> list[list[Any]]:
            return [r + [fill] * (width - len(r)) for r in rows]

        return {
            "input_ids": torch.tensor(widen(self.padded_full_token_ids, pad_id), dtype=torch.long),
            "attention_mask": torch.tensor(widen(self.padded_full_attention_mask, 0), dtype=torch.long),
            "agent_token_mask": torch.tensor(widen(self.padded_agent_token_mask, 0), dtype=torch.long),
            "per_token_rewards": torch.tensor(
                widen(self.padded_per_token_rewards, 0.0), dtype=torch.float32
            ),
            "sampled_logprobs": torch.tensor(
                widen(self.padded_sampled_logprobs, 0.0), dtype=torch.float32
            ),
            "final_rewards": torch.tensor(self.final_rewards, dtype=torch.float32),
            "group_indices": torch.tensor(self.group_indices, dtype=torch.long),
        }

    def to_records(self, *, include_failed: bool = True) -> list[dict[str, Any]]:
        """One flat record per row (scored episodes), then the failed episodes."""
        records = []
        for gi, episode, si in self._rows():
            record = episode.to_record()
            record["group_index"] = gi
            record["segment_index"] = si
            if self.tokenized:
                segment = episode.segments[si]
                record.update(
                    full_token_ids=segment.token_ids,
                    full_attention_mask=[1] * len(segment),
                    agent_token_mask=segment.agent_mask,
                    per_token_rewards=episode.segment_rewards[si],
                )
            records.append(record)
        if include_failed:
            for gi, group in enumerate(self.groups):
                for episode in group.failed:
                    record = episode.to_record()
                    record["group_index"] = gi
                    record["segment_index"] = 0
                    records.append(record)
        return records

    def to_dataset(self, *, include_failed: bool = True) -> datasets.Dataset:
        """A ``datasets.Dataset`` of :meth:`to_records` (unpadded token fields)."""
        return records_to_dataset(self.to_records(include_failed=include_failed))


def _rollout_features() -> dict[str, Any]:
    import datasets

    int_ = datasets.Value("int64")
    ints = datasets.List(datasets.Value("int64"))
    return {
        "session_id": datasets.Value("string"),
        "env_id": datasets.Value("string"),
        "task_index": int_,
        "rollout_index": int_,
        "episode_index": int_,
        "group_index": int_,
        "segment_index": int_,
        "task_data": datasets.Json(),
        "final_reward": datasets.Value("float64"),
        "num_turns": int_,
        "truncated": datasets.Value("bool"),
        "free_shot": datasets.Value("bool"),
        "error": datasets.Value("string"),
        "metrics": datasets.Json(),
        "messages": datasets.Json(),
        "step_infos": datasets.Json(),
        "num_segments": int_,
        "full_token_ids": ints,
        "full_attention_mask": ints,
        "agent_token_mask": ints,
        "per_token_rewards": datasets.List(datasets.Value("float64")),
        "num_tokens": int_,
        "num_agent_tokens": int_,
    }


def records_to_dataset(records: list[dict[str, Any]]) -> datasets.Dataset:
    """Rollout records as a Dataset with a fixed schema; dict columns stored as JSON.

    Columns a record does not have are None; keys outside the rollout schema (added
    by callers, e.g. evaluation results) are stored as JSON too.
    """
    import datasets

    known = _rollout_features()
    keys: list[str] = []
    for record in records:
        keys += [k for k in record if k not in keys]
    features = datasets.Features({k: known.get(k, datasets.Json()) for k in keys})
    rows = [
        {k: _jsonable(r.get(k)) if isinstance(features[k], datasets.Json) else r.get(k) for k in keys}
        for r in records
    ]
    return datasets.Dataset.from_list(rows, features=features)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))
