"""What ``agentsgym train`` does with the checkpoints in ``--output-dir``: the lock that
keeps a second run out while one writes there, which checkpoint ``--resume`` continues
from, whether a run may start there, and which checkpoint keywords the trainer's
``train`` takes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import typer

from agentsgym.cli import OutputLock, console
from agentsgym.errors import TrainerOptionError
from agentsgym_trl.checkpoints import (
    CHECKPOINT_PREFIX,
    changed_arguments,
    complete_checkpoints,
    last_checkpoint,
    read_run_state,
)
from agentsgym_trl.train_keywords import train_takes

TRAIN_LOG = "train_log.jsonl"
"""The step log a finished run leaves in ``--output-dir``."""

LOCK_FILE = "train.lock"
"""The lock of the run writing ``--output-dir`` (see :func:`lock_output_dir`)."""


def lock_output_dir(command: typer.Context, output_dir: Path) -> OutputLock:
    """Lock ``output_dir`` until ``command`` ends, as ``rollout`` and ``eval`` lock
    ``--out``: a second ``train`` there (a ``--resume`` while the run is alive, which
    would read checkpoints the live run prunes) is refused, naming the process that
    holds it. The kernel drops the lock however the process ends.

    A folder this command created and left empty (a run refused before it wrote
    anything, such as a misspelt env id) is removed when the command ends, so the
    corrected command does not find a stray folder."""
    created = [f for f in (output_dir, *output_dir.parents) if not f.exists()]  # leaf first
    output_dir.mkdir(parents=True, exist_ok=True)
    lock = OutputLock(output_dir / LOCK_FILE, output=output_dir, option="--output-dir")
    lock.acquire()
    if created:
        # the context's callbacks run last-registered first: the lock is released
        # (its file removed) before the folders are looked at
        command.call_on_close(lambda: _remove_while_empty(created))
    command.call_on_close(lock.release)
    return lock


def _remove_while_empty(folders: list[Path]) -> None:
    """Remove ``folders`` (each inside the next) until one holds something: a run
    wrote there, or another run took the lock since."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def checkpoint_to_resume(output_dir: Path, *, resume: bool, overwrite: bool) -> Path | None:
    """The checkpoint ``--resume`` continues from, after refusing to train over an
    earlier run in ``output_dir`` without ``--resume`` or ``--overwrite``."""
    if resume and overwrite:
        raise typer.BadParameter("--resume and --overwrite exclude each other")
    checkpoints = complete_checkpoints(output_dir)
    finished = (output_dir / TRAIN_LOG).exists()
    if overwrite:
        for _, folder in checkpoints:
            shutil.rmtree(folder, ignore_errors=True)
        for torn in output_dir.glob(f"{CHECKPOINT_PREFIX}*"):
            shutil.rmtree(torn, ignore_errors=True)
        return None
    if resume:
        found = last_checkpoint(output_dir)
        if found is None and finished:
            raise TrainerOptionError(
                f"{output_dir} holds a finished run without a checkpoint to continue "
                "from; pass --overwrite to train again there (checkpoints are written "
                "every --save-steps N steps)"
            )
        if found is None:
            console.print(f"no checkpoint in {output_dir} yet: starting the run")
        return found
    if checkpoints or finished:
        what = f"checkpoints up to step {checkpoints[-1][0]}" if checkpoints else "a finished run"
        raise TrainerOptionError(
            f"--output-dir {output_dir} holds an earlier run ({what}); pass --resume to "
            "continue it or --overwrite to start over"
        )
    return None


def checkpoint_keywords(
    adapter: Any, trainer: str, save_steps: int, save_total_limit: int, resume_from: Path | None
) -> dict[str, Any]:
    """The checkpoint keywords of ``adapter.train``, if it takes them."""
    if not train_takes(adapter, "resume_from"):
        if resume_from is not None:
            raise TrainerOptionError(f"trainer {trainer} cannot resume from a checkpoint")
        return {}
    return {
        "save_steps": save_steps,
        "save_total_limit": save_total_limit,
        "resume_from": resume_from,
    }


def check_resume_arguments(resume_from: Path, arguments: dict[str, Any]) -> None:
    """Refuse to continue ``resume_from`` with arguments other than its run's."""
    differences = changed_arguments(read_run_state(resume_from).arguments, arguments)
    if differences:
        raise TrainerOptionError(
            f"--resume refuses to continue {resume_from} with other arguments (only "
            "--max-steps, --max-concurrency, the checkpoint options and connection "
            "options may change):\n  - " + "\n  - ".join(differences)
        )
    console.print(f"resuming from {resume_from}")
