"""Training checkpoints: what a run needs to continue after a crash.

A checkpoint is a folder ``OUTPUT_DIR/checkpoint-N`` written after step ``N``. The
trainer writes its own state there (trl-grpo: TRL's checkpoint, with the model,
optimizer, scheduler and RNG states; per-token-grpo: the model, optimizer and
reference model; dataset-sink: the rows collected so far), and agentsgym adds
:data:`RUN_STATE_FILE`: the step log so far, the rollout source's position in its
tasks, and the run's arguments. That file is written last, atomically, so a
checkpoint a killed process left half-written is never taken for a complete one.

``agentsgym train ... --resume`` continues from the newest complete checkpoint:
the steps after it are played again, the ones before it are not.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentsgym.cli import write_atomically
from agentsgym.errors import TrainerOptionError
from agentsgym.runtime import StepMetrics

if TYPE_CHECKING:
    from agentsgym.runtime import RolloutSource

logger = logging.getLogger(__name__)

CHECKPOINT_PREFIX = "checkpoint-"
RUN_STATE_FILE = "agentsgym_run_state.json"
_CHECKPOINT = re.compile(rf"^{CHECKPOINT_PREFIX}(\d+)$")


@dataclass
class RunState:
    """agentsgym's part of a checkpoint."""

    step: int
    steps: list[dict[str, Any]] = field(default_factory=list)
    source: dict[str, Any] = field(default_factory=dict)
    arguments: dict[str, Any] = field(default_factory=dict)

    def step_metrics(self) -> list[StepMetrics]:
        return [StepMetrics.from_dict(s) for s in self.steps]


def checkpoint_path(output_dir: str | Path, step: int) -> Path:
    return Path(output_dir) / f"{CHECKPOINT_PREFIX}{step}"


def complete_checkpoints(output_dir: str | Path) -> list[tuple[int, Path]]:
    """``(step, folder)`` of every complete checkpoint, oldest first."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    found = []
    for child in root.iterdir():
        match = _CHECKPOINT.match(child.name)
        if match and (child / RUN_STATE_FILE).is_file():
            found.append((int(match.group(1)), child))
    return sorted(found)


def last_checkpoint(output_dir: str | Path) -> Path | None:
    """The newest complete checkpoint, or ``None``."""
    found = complete_checkpoints(output_dir)
    return found[-1][1] if found else None


def write_run_state(
    folder: str | Path,
    *,
    step: int,
    steps: list[StepMetrics],
    source: RolloutSource | None,
    arguments: dict[str, Any] | None,
    source_state: dict[str, Any] | None = None,
) -> Path:
    """Write :data:`RUN_STATE_FILE` into a checkpoint folder (last, atomically).
    ``source_state``: the source's state as of this step (a stream that plays ahead has
    already taken later steps' rows); default: ``source.state_dict()``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {
        "step": step,
        "steps": [s.to_dict() for s in steps],
        "source": (
            source_state
            if source_state is not None
            else source.state_dict()
            if source is not None
            else {}
        ),
        "arguments": dict(arguments or {}),
    }
    target = folder / RUN_STATE_FILE
    write_atomically(target, json.dumps(state, default=str).encode("utf-8"))
    return target


def read_run_state(folder: str | Path) -> RunState:
    path = Path(folder) / RUN_STATE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TrainerOptionError(
            f"cannot read the checkpoint {str(folder)!r} ({exc}); resume from an earlier "
            "one by deleting it, or start over with --overwrite"
        ) from None
    return RunState(
        step=int(data["step"]),
        steps=list(data.get("steps", [])),
        source=dict(data.get("source", {})),
        arguments=dict(data.get("arguments", {})),
    )


def prune_checkpoints(output_dir: str | Path, keep: int | None) -> None:
    """Delete all but the newest ``keep`` complete checkpoints (``None``: keep all)."""
    if keep is None or keep < 1:
        return
    for _, folder in complete_checkpoints(output_dir)[:-keep]:
        shutil.rmtree(folder, ignore_errors=True)


def changed_arguments(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """What differs between a checkpoint's arguments and this run's, one line each."""
    lines = []
    for key in sorted(set(saved) | set(current)):
        if saved.get(key) != current.get(key):
            lines.append(f"{key}: {saved.get(key)!r} in the checkpoint, {current.get(key)!r} now")
    return lines
