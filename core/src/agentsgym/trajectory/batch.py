"""TrajectoryGroup and TrajectoryBatch: padded rollouts, ready for a trainer.

Rows are flat: one per scored episode (the last of each completed trial), or one per
segment of an episode a non-prefix-preserving template split; a group's (task's) rows
are consecutive. Each group is padded to its own longest row,
:meth:`TrajectoryBatch.padded_arrays` to the batch's: ids with ``pad_token_id``, the
rest with 0. Failed episodes stay on their group (``group.failed``), never in rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from agentsgym.errors import TokenizerRequiredError
from agentsgym.trajectory.episode import (
    UNKNOWN_VERSION,
    Episode,
    segment_arrays,
    segment_fields,
    segment_versions,
)
from agentsgym.trajectory.records import records_to_dataset
from agentsgym.trajectory.segment import FLOAT_DTYPE
from agentsgym.types import Messages

if TYPE_CHECKING:
    import datasets
    import torch



def pad_rows(
    episodes_rows: list[tuple[Episode, int]], width: int, pad_id: int
) -> dict[str, np.ndarray]:
    """The padded 2-D arrays of some (episode, segment) rows, ``width`` columns wide: ids
    and masks int64 (as embedding layers and attention masks take), the rest float32.
    ``policy_versions`` (int64) holds each agent token's policy version (per token when
    its reply reported one per token), ``-1`` on env tokens, padding and tokens whose
    agent could not say its version."""
    rows = len(episodes_rows)
    arrays = {
        "input_ids": np.full((rows, width), pad_id, dtype=np.int64),
        "attention_mask": np.zeros((rows, width), dtype=np.int64),
        "agent_token_mask": np.zeros((rows, width), dtype=np.int64),
        "per_token_rewards": np.zeros((rows, width), dtype=FLOAT_DTYPE),
        "sampled_logprobs": np.zeros((rows, width), dtype=FLOAT_DTYPE),
        "policy_versions": np.full((rows, width), UNKNOWN_VERSION, dtype=np.int64),
    }
    for row, (episode, index) in enumerate(episodes_rows):
        segment = episode.segments[index]
        n = len(segment)
        arrays["input_ids"][row, :n] = segment.token_ids
        arrays["attention_mask"][row, :n] = 1
        arrays["agent_token_mask"][row, :n] = segment.agent_mask
        arrays["per_token_rewards"][row, :n] = episode.segment_rewards[index]
        if (logprobs := segment.logprobs) is not None:
            arrays["sampled_logprobs"][row, :n] = logprobs
        arrays["policy_versions"][row, :n] = segment_versions(episode, index)
    return arrays


class _PaddedLists:
    """The ``padded_*`` properties: the padded rows as lists of lists."""

    def _padded(self, name: str) -> list[list[Any]]:
        raise NotImplementedError

    @property
    def padded_full_token_ids(self) -> list[list[int]]:
        return self._padded("input_ids")

    @property
    def padded_full_attention_mask(self) -> list[list[int]]:
        return self._padded("attention_mask")

    @property
    def padded_agent_token_mask(self) -> list[list[int]]:
        return self._padded("agent_token_mask")

    @property
    def padded_per_token_rewards(self) -> list[list[float]]:
        return self._padded("per_token_rewards")

    @property
    def padded_sampled_logprobs(self) -> list[list[float]]:
        return self._padded("sampled_logprobs")

    @property
    def padded_policy_versions(self) -> list[list[int]]:
        return self._padded("policy_versions")


@dataclass
class TrajectoryGroup(_PaddedLists):
    """The rollouts of one task, padded to the group's longest row."""

    task_index: int
    task_data: dict[str, Any]
    env_id: str
    trials: list[list[Episode]]
    pad_token_id: int | None
    tokenized: bool
    role: str | None = None
    """The role whose episodes these are, in an env with roles (one group per task and
    role: a trainer sees it as an ordinary group)."""

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

    def padded_arrays(self, width: int | None = None) -> dict[str, np.ndarray]:
        """The group's rows as 2-D numpy arrays (see :func:`pad_rows`)."""
        self._require_tokens()
        pad = self.pad_token_id if self.pad_token_id is not None else 0
        return pad_rows(self.rows, self.padded_length if width is None else width, pad)

    def _padded(self, name: str) -> list[list[Any]]:
        return self.padded_arrays()[name].tolist()  # type: ignore[no-any-return]


class TrajectoryBatch(_PaddedLists):
    """Groups of padded rollouts, row-aligned across every field (layout: module docstring)."""

    def __init__(self, groups: list[TrajectoryGroup]) -> None:
        self.groups = groups

    def __len__(self) -> int:
        return sum(len(g.rows) for g in self.groups)

    def _rows(self) -> list[tuple[int, Episode, int]]:
        return [(gi, e, si) for gi, g in enumerate(self.groups) for e, si in g.rows]

    def _padded(self, name: str) -> list[list[Any]]:
        return [row for g in self.groups for row in g._padded(name)]

    @property
    def tokenized(self) -> bool:
        return all(g.tokenized for g in self.groups)

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

    def padded_arrays(self) -> dict[str, np.ndarray]:
        """Every row padded to the batch's longest row, plus final rewards and groups."""
        width = max((g.padded_length for g in self.groups), default=0)  # requires tokens
        pad_id = next((g.pad_token_id for g in self.groups if g.pad_token_id is not None), 0)
        rows = [(e, si) for _, e, si in self._rows()]
        arrays = pad_rows(rows, width, pad_id)
        arrays["final_rewards"] = np.asarray([e.final_reward for e, _ in rows], dtype=FLOAT_DTYPE)
        arrays["group_indices"] = np.asarray(self.group_indices, dtype=np.int64)
        return arrays

    def to_torch(self) -> dict[str, torch.Tensor]:
        """Tensors of :meth:`padded_arrays` (shared memory, no copy)."""
        import torch

        return {name: torch.from_numpy(array) for name, array in self.padded_arrays().items()}

    def to_records(self, *, include_failed: bool = True) -> list[dict[str, Any]]:
        """One flat record per row (scored episodes), then the failed episodes."""
        return [self._record(*row) for row in self._record_rows(include_failed)]

    def _record_rows(self, include_failed: bool) -> list[tuple[int, Episode, int]]:
        failed = [(gi, e, 0) for gi, g in enumerate(self.groups) for e in g.failed]
        return self._rows() + (failed if include_failed else [])

    def _record(self, gi: int, episode: Episode, si: int, tokens: bool = True) -> dict[str, Any]:
        record = {**episode.to_record(token_fields=tokens), "group_index": gi, "segment_index": si}
        if tokens and self.tokenized and si:
            record.update(segment_fields(episode, si))
        return record

    def to_dataset(self, *, include_failed: bool = True) -> datasets.Dataset:
        """A ``datasets.Dataset`` of :meth:`to_records` (unpadded token fields). The token
        columns go from the episodes' arrays to arrow directly: as Python lists they
        would take about ten times the memory of the data."""
        rows = self._record_rows(include_failed)
        arrays = [segment_arrays(e, si) if e.tokenized and e.segments else None for _, e, si in rows]
        records = [self._record(*row, tokens=False) for row in rows]
        return records_to_dataset(records, token_arrays=arrays)


def zero_rewards(episode: Episode) -> None:
    """Zero an episode's per-token rewards (free shots), keeping their shapes."""
    episode.segment_rewards = [np.zeros(len(r), dtype=FLOAT_DTYPE) for r in episode.segment_rewards]
