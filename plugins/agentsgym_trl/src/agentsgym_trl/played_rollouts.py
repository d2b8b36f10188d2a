"""What ``agentsgym train`` played, kept for ``agentsgym view``.

Every batch a training run plays is appended to ``--output-dir/played.jsonl`` as it
is played: one row per episode (per view of a split episode), the rows ``agentsgym
rollout --out`` writes, so ``agentsgym view DIR/played.jsonl`` shows the episodes,
their rewards and their tokens. ``group_index`` counts the played groups across the
whole file; ``task_index`` and ``rollout_index`` are the episode's own.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentsgym import RolloutSource

if TYPE_CHECKING:
    from agentsgym import Agent, TrajectoryBatch

logger = logging.getLogger(__name__)

PLAYED_FILE = "played.jsonl"
"""The file in ``--output-dir`` that holds what training played."""


class RecordingSource(RolloutSource):
    """A :class:`RolloutSource` that appends every batch it plays to ``record_to``.

    :param append: continue the file (a resumed run); else it starts empty.
    """

    def __init__(
        self,
        rows: Iterable[Mapping[str, Any]],
        *,
        record_to: Path,
        append: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(rows, **options)
        self.record_to = record_to
        record_to.parent.mkdir(parents=True, exist_ok=True)
        self._groups = _next_group(record_to) if append else 0
        self._append_lock = threading.Lock()  # a rollout stream plays batches in threads
        if not append:
            record_to.write_text("")

    def play(
        self,
        rows: Sequence[Mapping[str, Any]],
        agent: Agent,
        num_rollouts: int | None = None,
    ) -> TrajectoryBatch:
        batch = super().play(rows, agent, num_rollouts)
        self._append(batch)
        return batch

    def _append(self, batch: TrajectoryBatch) -> None:
        records = batch.to_records()
        with self._append_lock, self.record_to.open("a", encoding="utf-8") as handle:
            for record in records:
                record["group_index"] = self._groups + record["group_index"]
                handle.write(json.dumps(record) + "\n")
        self._groups += len(batch.groups)


def _next_group(path: Path) -> int:
    """One past the highest ``group_index`` in ``path`` (0 when there is none)."""
    highest = -1
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return 0
    for line in lines:
        try:
            highest = max(highest, int(json.loads(line)["group_index"]))
        except (ValueError, KeyError, TypeError):
            logger.warning("%s: skipping a line that is not a played rollout", path)
    return highest + 1
