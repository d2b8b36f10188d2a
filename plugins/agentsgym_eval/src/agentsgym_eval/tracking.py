"""``agentsgym eval --report-to trackio|wandb``: the summary in an experiment tracker.

One run, named ``--run-name`` in ``--project``, with the run's arguments as its
configuration, gets every number of the summary under ``eval/`` (``eval/accuracy``,
``eval/pass_at_k/1``, ``eval/roles/x/accuracy``...) and a table ``eval/samples`` of the
first ``--log-samples K`` samples (their text and reward), all at step 0. The
trackers are :mod:`agentsgym.cli.tracking`'s, shared with ``agentsgym train``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentsgym.cli import SAMPLE_COLUMNS, sample_rows, start_tracker, tracked_values
from agentsgym.runtime import redact

if TYPE_CHECKING:
    from agentsgym_eval.samples import EvalReport, Sample

EVAL_PREFIX = "eval/"


def report_summary(
    report_to: str,
    report: EvalReport,
    samples: Sequence[Sample],
    *,
    project: str,
    run_name: str | None,
    config: Mapping[str, Any],
    num_samples: int,
) -> str | None:
    """Log ``report`` (and a table of ``num_samples`` of ``samples``) to a new run of the
    tracker ``report_to`` names; the run's name (``None`` for ``none``)."""
    tracker = start_tracker(report_to, project=project, run_name=run_name, config=redact(config))
    if tracker is None:
        return None
    try:
        values: dict[str, Any] = tracked_values(report.model_dump(), prefix=EVAL_PREFIX)
        if num_samples and samples:
            rows = sample_rows(samples[:num_samples])
            values[f"{EVAL_PREFIX}samples"] = tracker.table(SAMPLE_COLUMNS, rows)
        tracker.log(values, step=0)
    finally:
        tracker.finish()
    return tracker.run_name
