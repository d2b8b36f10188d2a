"""Experiment tracking for commands: ``--report-to trackio|wandb|none``.

A command that reports opens a :class:`Tracker` (a run in trackio or in W&B), logs
numbers to it (:func:`tracked_values` flattens any mapping of them, so a metric added
to a step log later is logged without a change here) and tables of sample episodes
(:func:`sample_rows`), then finishes it. The trackers' libraries are optional: none is
imported until a run starts, and asking for one that is not installed is a
:class:`~agentsgym.errors.TrackerError` that says what to install, raised by
:func:`~agentsgym.cli.trackers.tracker_class` before any model loads.

Both libraries work offline: trackio writes a local SQLite database under
``TRACKIO_DIR`` (default ``~/.cache/huggingface/trackio``); W&B with
``WANDB_MODE=offline`` writes its run files under ``WANDB_DIR`` (default ``./wandb``),
for ``wandb sync`` later. The backends, and the choice among them, live in
:mod:`agentsgym.cli.trackers`.
"""

from __future__ import annotations

import importlib.util
import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

import typer

NO_TRACKER = "none"

SAMPLE_COLUMNS = ("task_index", "rollout_index", "role", "reward", "turns", "error", "text")
"""The columns of a table of sample episodes (:func:`sample_rows`)."""


class Tracker(ABC):
    """A run in an experiment tracker, opened by :meth:`start`."""

    name: ClassVar[str]
    """The ``--report-to`` value."""
    module: ClassVar[str]
    """The library's import name."""
    install: ClassVar[str]
    """How to install the library."""

    project: str
    run_name: str

    @classmethod
    def installed(cls) -> bool:
        return importlib.util.find_spec(cls.module) is not None

    @classmethod
    @abstractmethod
    def start(cls, *, project: str, run_name: str | None, config: Mapping[str, Any]) -> Tracker:
        """Open a run named ``run_name`` (``None``: the library names it) in ``project``,
        with ``config`` as its configuration."""

    @abstractmethod
    def log(self, values: Mapping[str, Any], *, step: int) -> None:
        """Log ``values`` (numbers, or tables from :meth:`table`) at ``step``."""

    @abstractmethod
    def table(self, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Any:
        """A table the library logs: ``rows`` under ``columns``."""

    def restore_config(self) -> None:
        """Add the run's configuration again, after a library's own integration (TRL's
        callbacks) re-opened the run with a configuration of its own, whose values are
        kept. Default: nothing to do."""

    @abstractmethod
    def finish(self) -> None:
        """Close the run (its files are complete); a second call does nothing."""


def tracked_values(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """Every finite number in ``metrics``, keyed ``prefix + key``; nested mappings are
    flattened with ``/`` (``{"pass_at_k": {1: 0.5}}`` -> ``pass_at_k/1``). Booleans,
    text, ``None`` and non-finite numbers are left out."""
    values: dict[str, float] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            values.update(tracked_values(value, f"{name}/"))
        elif (
            isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        ):
            values[name] = float(value)
    return values


def conversation_text(messages: Iterable[Mapping[str, Any]]) -> str:
    """An episode's messages as text, one ``role: content`` block per message."""
    return "\n\n".join(f"{m.get('role', '?')}: {m.get('content') or ''}" for m in messages)


def sample_rows(samples: Iterable[Any]) -> list[list[Any]]:
    """The rows, under :data:`SAMPLE_COLUMNS`, of played episodes or scored samples
    (anything with ``task_index``, ``rollout_index``, ``role``, ``final_reward``,
    ``num_turns``, ``error`` and ``messages``, as an ``Episode`` and an eval sample have)."""
    return [
        [
            s.task_index,
            s.rollout_index,
            s.role or "",
            float(s.final_reward),
            s.num_turns,
            s.error or "",
            conversation_text(s.messages),
        ]
        for s in samples
    ]


def report_to_option() -> Any:
    """``--report-to trackio|wandb|none``."""
    return typer.Option(
        NO_TRACKER,
        "--report-to",
        help="log the run to an experiment tracker: trackio (local-first), wandb (offline "
        "with WANDB_MODE=offline) or none; the library is installed separately "
        "(pip install trackio / wandb)",
    )


def project_option() -> Any:
    """``--project``: the tracker's project."""
    return typer.Option("agentsgym", "--project", help="with --report-to: the tracker's project")


def run_name_option() -> Any:
    """``--run-name``: the tracker's run name."""
    return typer.Option(
        None, "--run-name", help="with --report-to: the run's name (default: the tracker's)"
    )


def log_samples_option() -> Any:
    """``--log-samples K``: episodes per sample table."""
    return typer.Option(
        4,
        "--log-samples",
        min=0,
        help="with --report-to: episodes in each table of samples (text and reward); 0: none",
    )


def log_samples_every_option() -> Any:
    """``--log-samples-every N``: a table of sample episodes every N steps."""
    return typer.Option(
        10,
        "--log-samples-every",
        min=0,
        help="with --report-to: log a table of sample episodes every N steps (0: never)",
    )
