"""The prompts TRL will ask ``trl-grpo``'s ``rollout_func`` for, known steps ahead.

TRL picks each step's prompts itself: its ``RepeatSampler`` draws a permutation of the
dataset per epoch (from its own seeded generator) and the dataloader cuts it into one
generation batch per optimizer step. A rollout stream that plays ahead of the trainer
(``--async``) must know those prompts before TRL asks for them, and must play the same
ones in the same order, so that ``--max-staleness 0`` trains exactly what the
synchronous run trains.

:class:`PlannedSampler` wraps TRL's sampler: every epoch's order is drawn from TRL's
sampler once, in epoch order, whether the dataloader or the stream needs it first, and
the dataloader is served exactly those orders. :meth:`PlannedSampler.prompts_of` gives
the prompt entries of any step; :class:`PlanCursor` hands them to a
:class:`~agentsgym_trl.rollout_stream.RolloutStream` one step at a time (it is the
stream's source of rows). The rollout function compares what TRL passes with what was
played and refuses a mismatch, so a change in TRL's sampling order is an error, never
training on other prompts than TRL scores.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

from torch.utils.data import Sampler

from agentsgym.errors import TrainerOptionError
from agentsgym_trl.step_rows import StepRows


class PlannedSampler(Sampler[int]):  # type: ignore[misc]
    """TRL's train sampler, with each epoch's order drawn once and kept.

    :param sampler: TRL's ``RepeatSampler`` (or any sampler whose every ``__iter__`` is
        one epoch, each prompt index repeated ``num_generations`` times in a row).
    :param prompts: the train dataset's ``prompt`` column.
    :param step_size: prompt entries per optimizer step (TRL's per-device batch).
    """

    def __init__(self, sampler: Any, prompts: Sequence[str], step_size: int) -> None:
        self.sampler = sampler
        self.prompts = list(prompts)
        self.step_size = step_size
        self.steps_per_epoch = len(sampler) // step_size
        if self.steps_per_epoch < 1:
            raise TrainerOptionError(
                f"trl-grpo --async: an epoch of TRL's sampler holds {len(sampler)} prompt "
                f"entries, fewer than one step's {step_size}; use more tasks"
            )
        self._epochs: list[list[int]] = []
        self._served = 0
        self._first_epoch = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self) -> Iterator[int]:
        with self._lock:
            served, self._served = self._served, self._served + 1
            order = self._epoch(served)
        return iter(order)

    def start_at(self, global_step: int) -> None:
        """The first epoch the dataloader was served is the one holding step
        ``global_step + 1`` (a run resumed at ``global_step``: transformers skips the
        epochs before it without drawing them, and the steps of it already trained)."""
        self._first_epoch = global_step // self.steps_per_epoch

    def prompts_of(self, step: int) -> list[str]:
        """The prompt entries TRL passes for optimizer step ``step`` (1-based)."""
        epoch, position = divmod(step - 1, self.steps_per_epoch)
        with self._lock:
            order = self._epoch(epoch - self._first_epoch)
        start = position * self.step_size
        return [self.prompts[i] for i in order[start : start + self.step_size]]

    def _epoch(self, served: int) -> list[int]:
        """The order of the ``served``-th epoch the dataloader iterates (lock held)."""
        if served < 0:
            raise TrainerOptionError(
                "trl-grpo --async asked for a step before the resumed run's first epoch"
            )
        while len(self._epochs) <= served:
            self._epochs.append(list(self.sampler))
        return self._epochs[served]


class PlanCursor:
    """The planned prompts, one step at a time: the source of a rollout stream's rows.

    The stream calls :meth:`next_rows` under its lock, once per step in step order, and
    :meth:`state_dict` to record where a step's rows were taken (TRL's checkpoints
    keep its own data position, so there is nothing of ours to record). ``taken`` keeps
    each step's rows until the rollout function takes the step.
    """

    def __init__(self, plan: PlannedSampler, first_step: int) -> None:
        self.plan = plan
        self.next_step = first_step
        self.taken: dict[int, list[str]] = {}

    def next_rows(self) -> list[str]:
        """The next step's prompt entries, which say their step (recorded with the rows)."""
        step, self.next_step = self.next_step, self.next_step + 1
        self.taken[step] = StepRows(self.plan.prompts_of(step), step=step)
        return self.taken[step]

    def state_dict(self) -> dict[str, Any]:
        return {}
