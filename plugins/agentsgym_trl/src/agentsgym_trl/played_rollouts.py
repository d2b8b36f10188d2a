"""What ``agentsgym train`` played, kept for ``agentsgym view``.

Every batch a training run plays is appended to ``--output-dir/played.jsonl`` as it
is played: one row per episode (per view of a split episode), the rows ``agentsgym
rollout --out`` writes, so ``agentsgym view DIR/played.jsonl`` shows the episodes,
their rewards and their tokens. ``group_index`` counts the played groups across the
whole file; ``task_index`` and ``rollout_index`` are the episode's own.

In an env with roles, the groups of every role are recorded (``role``), those of a
role played by an agent of its own (``--agent ROLE=NAME``) too, but only the groups
of ``trained_roles`` go to the trainer.

``step`` is the training step whose batch a row belongs to: the rows a trainer takes
with :meth:`RolloutSource.next_rows`, one call per step, and those trl-grpo plays for
a step, say so (:class:`~agentsgym_trl.step_rows.StepRows`); rows played otherwise
have none. A row's ``per_token_policy_versions`` and its ``step`` (trained at version
``step - 1``) tell each token's age when it was trained. A run that plays ahead
(``--async``) records a batch when the trainer takes its step, not when it is played
(see :class:`~agentsgym_trl.rollout_stream.AdmissionRecords`): each of its rows then
says ``"discarded": true`` when its group was more than ``--max-staleness`` versions
old and was not trained, ``false`` otherwise, so the rows alone tell what was trained.
When a killed run is resumed from its checkpoint of step ``s``, the rows of steps after
``s`` are dropped from the file: those steps are played again, fresh, so the finished
file holds each step's groups once, as trained.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentsgym import TrajectoryBatch, TrajectoryGroup
from agentsgym.cli import write_atomically
from agentsgym.runtime import RolloutSource
from agentsgym_trl.step_rows import StepRows

if TYPE_CHECKING:
    from agentsgym import Agent

logger = logging.getLogger(__name__)

PLAYED_FILE = "played.jsonl"
"""The file in ``--output-dir`` that holds what training played."""


class RecordingSource(RolloutSource):
    """A :class:`RolloutSource` that appends every batch it plays to ``record_to``.

    :param append: continue the file (a resumed run); else it starts empty.
    :param trained_roles: in an env with roles, the roles whose groups :meth:`play`
        returns (``None``: every group played).
    """

    def __init__(
        self,
        rows: Iterable[Mapping[str, Any]],
        *,
        record_to: Path,
        append: bool = False,
        trained_roles: Iterable[str] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(rows, **options)
        self.record_to = record_to
        self.trained_roles = None if trained_roles is None else frozenset(trained_roles)
        record_to.parent.mkdir(parents=True, exist_ok=True)
        self._groups = _next_group(record_to) if append else 0
        self._append_lock = threading.Lock()  # a rollout stream plays batches in threads
        self._steps_taken = 0
        # under a rollout stream: each batch play returned (by id), until its step is taken
        self._held: dict[int, _HeldBatch] | None = None
        if not append:
            record_to.write_text("")

    def next_rows(self, count: int | None = None) -> list[Any]:
        """The next step's rows, which say their step (:class:`StepRows`)."""
        self._steps_taken += 1
        return StepRows(super().next_rows(count), step=self._steps_taken)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "steps_taken": self._steps_taken}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a checkpoint: the rows recorded for steps after it (played by
        the run that was stopped, never trained or trained without being kept) are
        dropped, since those steps play again."""
        super().load_state_dict(state)
        if "steps_taken" not in state:
            return
        self._steps_taken = int(state["steps_taken"])
        with self._append_lock:
            dropped = _drop_steps_after(self.record_to, self._steps_taken)
            self._groups = _next_group(self.record_to)
        if dropped:
            logger.info(
                "%s: dropped %d rows of steps after step %d, which play again",
                self.record_to,
                dropped,
                self._steps_taken,
            )

    def play(
        self,
        rows: Sequence[Mapping[str, Any]],
        agent: Agent,
        num_rollouts: int | None = None,
    ) -> TrajectoryBatch:
        batch = super().play(rows, agent, num_rollouts)
        step = rows.step if isinstance(rows, StepRows) else None
        trained = batch
        if self.trained_roles is not None:
            trained = TrajectoryBatch([g for g in batch.groups if g.role in self.trained_roles])
        with self._append_lock:
            held = self._held
            if held is not None:
                held[id(trained)] = _HeldBatch(trained, batch, step)
        if held is None:
            self._append(batch, step)
        return trained

    def trained_roles_of(self, row: Mapping[str, Any]) -> tuple[str, ...] | None:
        """The env's trainable roles that this run trains (those in ``trained_roles``)."""
        roles = super().trained_roles_of(row)
        if roles is None or self.trained_roles is None:
            return roles
        return tuple(role for role in roles if role in self.trained_roles)

    def hold_records(self) -> None:
        """Record each played batch when :meth:`record_taken` says its step was taken
        (a rollout stream's admission), not when it is played."""
        with self._append_lock:
            if self._held is None:
                self._held = {}

    def record_taken(self, played: TrajectoryBatch, discarded: Sequence[TrajectoryGroup]) -> None:
        """Record ``played`` (a batch :meth:`play` returned) with every row's
        ``discarded``: whether its group is one of ``discarded`` (not trained)."""
        with self._append_lock:
            held = (self._held or {}).pop(id(played), None)
        if held is None:
            logger.warning("%s: a batch taken that this source did not play", self.record_to)
            return
        dropped = {id(group) for group in discarded}
        flags = [id(group) in dropped for group in held.played.groups]
        self._append(held.played, held.step, discarded=flags)

    def _append(
        self, batch: TrajectoryBatch, step: int | None, *, discarded: list[bool] | None = None
    ) -> None:
        records = batch.to_records()
        with self._append_lock, self.record_to.open("a", encoding="utf-8") as handle:
            for record in records:
                if discarded is not None:
                    record["discarded"] = discarded[record["group_index"]]
                record["group_index"] = self._groups + record["group_index"]
                if step is not None:
                    record["step"] = step
                handle.write(json.dumps(record) + "\n")
            self._groups += len(batch.groups)


@dataclass
class _HeldBatch:
    """A played batch kept until its step is taken: what ``play`` returned (the trained
    roles' groups; kept alive so that its id stays its own), everything played, and its
    step."""

    returned: TrajectoryBatch
    played: TrajectoryBatch
    step: int | None


def _drop_steps_after(path: Path, step: int) -> int:
    """Rewrite ``path`` without the rows of steps after ``step`` (and without a torn last
    line a killed run left), a line at a time; returns how many rows were dropped."""
    if not path.exists():
        return 0
    dropped = 0

    def keep_rows(target: Path) -> None:
        nonlocal dropped
        with path.open(encoding="utf-8") as source, target.open("w", encoding="utf-8") as out:
            for line in source:
                try:
                    record = json.loads(line)
                except ValueError:
                    logger.warning("%s: dropping a line that is not a played rollout", path)
                    continue
                if isinstance(record.get("step"), int) and record["step"] > step:
                    dropped += 1
                    continue
                out.write(line if line.endswith("\n") else line + "\n")

    write_atomically(path, keep_rows)
    return dropped


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
