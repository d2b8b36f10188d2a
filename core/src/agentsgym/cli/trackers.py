"""The trackers ``--report-to`` offers, trackio and W&B, and the choice among them
(see :mod:`agentsgym.cli.tracking`).

Each imports its library only when a run starts. trackio prints where its database is
and how to open its dashboard; those lines go to stderr, so that a command's own
output (a JSON summary) stays clean.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from agentsgym.cli.tracking import NO_TRACKER, Tracker
from agentsgym.errors import TrackerError


@contextlib.contextmanager
def _prints_to_stderr() -> Iterator[None]:
    with contextlib.redirect_stdout(sys.stderr):
        yield


class TrackioTracker(Tracker):
    """A trackio run: a local SQLite database under ``TRACKIO_DIR`` (or a Space, when
    ``TRACKIO_SPACE_ID`` names one)."""

    name = "trackio"
    module = "trackio"
    install = "pip install trackio"

    def __init__(self, run: Any, project: str, config: Mapping[str, Any]) -> None:
        self._run = run
        self.project = project
        self.run_name = str(run.name)
        self._config = dict(config)
        self._finished = False

    @classmethod
    def start(
        cls, *, project: str, run_name: str | None, config: Mapping[str, Any]
    ) -> TrackioTracker:
        import trackio

        with _prints_to_stderr():
            run = trackio.init(project=project, name=run_name, config=dict(config), embed=False)
        return cls(run, project, config)

    def log(self, values: Mapping[str, Any], *, step: int) -> None:
        self._run.log(dict(values), step=step)

    def table(self, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Any:
        import trackio

        return trackio.Table(columns=list(columns), data=[list(row) for row in rows])

    def restore_config(self) -> None:
        import trackio

        current = trackio.context_vars.current_run.get()
        if current is not None:
            for key, value in self._config.items():
                current.config.setdefault(key, value)  # the library's own values kept

    def finish(self) -> None:
        """Finish the current trackio run: this one, or the one a library's integration
        re-opened under its name (TRL's callback finishes that one itself)."""
        if self._finished:
            return
        self._finished = True
        import trackio

        if trackio.context_vars.current_run.get() is not None:
            with _prints_to_stderr():
                trackio.finish()


class WandbTracker(Tracker):
    """A W&B run: online, or files under ``WANDB_DIR`` with ``WANDB_MODE=offline``."""

    name = "wandb"
    module = "wandb"
    install = "pip install wandb"

    def __init__(self, run: Any, project: str) -> None:
        self._run = run
        self.project = project
        self.run_name = str(run.name)
        self._finished = False

    @classmethod
    def start(
        cls, *, project: str, run_name: str | None, config: Mapping[str, Any]
    ) -> WandbTracker:
        import wandb

        run = wandb.init(project=project, name=run_name, config=dict(config))
        return cls(run, project)

    def log(self, values: Mapping[str, Any], *, step: int) -> None:
        self._run.log(dict(values), step=step)

    def table(self, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Any:
        import wandb

        return wandb.Table(columns=list(columns), data=[list(row) for row in rows])

    def finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        self._run.finish()


TRACKERS: dict[str, type[Tracker]] = {t.name: t for t in (TrackioTracker, WandbTracker)}
"""The trackers by ``--report-to`` name."""


def tracker_class(report_to: str) -> type[Tracker] | None:
    """The tracker ``--report-to`` names (``None`` for ``none``), its library checked.

    :raises TrackerError: an unknown name (with the choices), or a library that is not
        installed (with the line that installs it).
    """
    name = report_to.strip().lower()
    if name == NO_TRACKER:
        return None
    tracker = TRACKERS.get(name)
    if tracker is None:
        choices = ", ".join([*TRACKERS, NO_TRACKER])
        raise TrackerError(f"--report-to {report_to!r} is not a tracker; use one of {choices}")
    if not tracker.installed():
        raise TrackerError(
            f"--report-to {name} needs the {tracker.module} library, which is not "
            f"installed: {tracker.install}"
        )
    return tracker


def start_tracker(
    report_to: str, *, project: str, run_name: str | None, config: Mapping[str, Any]
) -> Tracker | None:
    """A started run of the tracker ``report_to`` names (``None`` for ``none``).

    :raises TrackerError: see :func:`tracker_class`; or the library could not start the
        run (no W&B login: ``wandb login``, or ``WANDB_MODE=offline``).
    """
    tracker = tracker_class(report_to)
    if tracker is None:
        return None
    try:
        return tracker.start(project=project, run_name=run_name, config=config)
    except TrackerError:
        raise
    except Exception as exc:
        hint = (
            " (without a W&B login, run `wandb login` or set WANDB_MODE=offline)"
            if tracker.name == "wandb"
            else ""
        )
        raise TrackerError(
            f"--report-to {tracker.name} could not start a run in project {project!r}: "
            f"{type(exc).__name__}: {exc}{hint}"
        ) from exc
