"""``agentsgym train --report-to trackio|wandb``: the step log and sample episodes in an
experiment tracker (:mod:`agentsgym.cli.tracking`).

The run starts before the first step, named ``--run-name`` in ``--project``, with the
run's arguments as its configuration. Each step logs every number of the step log
(whatever the trainer wrote: a metric added to the step log later is logged as well)
under ``train/``, with ``train/global_step`` and ``train/tokens_per_second``; every
``--log-samples-every N`` steps, a table ``train/samples`` of the last
``--log-samples K`` episodes played (their text and reward). The held-out scores of
``--eval-steps`` (:mod:`.train_eval`) are logged under ``eval/`` at their step, as TRL's
integrations name an evaluation's numbers.

How a step reaches the run depends on the adapter:

* an adapter whose training library reports by itself takes ``tracking`` in ``train``
  (trl-grpo passes ``report_to`` to TRL, whose callbacks log into the same run); it
  adds :meth:`TrainTracking.step_values` to the library's own entry of each step;
* every other adapter (per-token-grpo, dataset-sink, a plugin's) is logged by the
  command, through :meth:`TrainTracking.on_step`.
"""

from __future__ import annotations

import inspect
import threading
from collections import deque
from collections.abc import Mapping
from typing import Any

from agentsgym.cli import SAMPLE_COLUMNS, Tracker, sample_rows, start_tracker, tracked_values
from agentsgym.runtime import StepMetrics
from agentsgym_trl.train_eval import EVAL_PREFIX

STEP_PREFIX = "train/"
"""The prefix of the step log's names in the tracker (TRL's integrations use it too)."""
LIBRARY_EVAL_PREFIX = "eval_"
"""How an evaluation's numbers start in the logs TRL's integrations report: they log them
under ``eval/`` (and every other number under ``train/``)."""
SAMPLES_KEY = "samples"


class TrainTracking:
    """What ``train`` logs to one tracker run (see the module docstring).

    :param samples_every: a table of samples every N steps (0: never).
    :param samples: episodes per table (0: no tables).
    """

    def __init__(self, tracker: Tracker, *, samples_every: int = 0, samples: int = 0) -> None:
        self.tracker = tracker
        self.samples_every = samples_every if samples > 0 else 0
        # episodes arrive from the threads that play rollouts (--async)
        self._lock = threading.Lock()
        self._recent: deque[Any] = deque(maxlen=max(samples, 1))
        self._config_restored = False

    @classmethod
    def start(
        cls,
        report_to: str,
        *,
        project: str,
        run_name: str | None,
        config: Mapping[str, Any],
        samples_every: int,
        samples: int,
    ) -> TrainTracking | None:
        """A started run (``None`` for ``--report-to none``)."""
        tracker = start_tracker(report_to, project=project, run_name=run_name, config=config)
        if tracker is None:
            return None
        return cls(tracker, samples_every=samples_every, samples=samples)

    @property
    def report_to(self) -> str:
        return self.tracker.name

    @property
    def project(self) -> str:
        return self.tracker.project

    @property
    def run_name(self) -> str:
        return self.tracker.run_name

    def on_episode(self, episode: Any) -> None:
        """Keep a played episode for the next table of samples."""
        if self.samples_every:
            with self._lock:
                self._recent.append(episode)

    def step_values(self, metrics: StepMetrics) -> dict[str, Any]:
        """A step's values under the step log's own names: its numbers,
        ``tokens_per_second`` and, when a table is due, ``samples``."""
        values: dict[str, Any] = tracked_values(metrics.to_dict())
        values.pop("step", None)
        if metrics.seconds > 0:
            values["tokens_per_second"] = metrics.num_tokens / metrics.seconds
        if self.samples_every and metrics.step % self.samples_every == 0:
            with self._lock:
                episodes, self._recent = list(self._recent), deque(maxlen=self._recent.maxlen)
            if episodes:
                values[SAMPLES_KEY] = self.tracker.table(SAMPLE_COLUMNS, sample_rows(episodes))
        return values

    def on_step(self, metrics: StepMetrics) -> None:
        """Log a step (for an adapter whose library does not report by itself)."""
        values = {
            name if name.startswith(EVAL_PREFIX) else f"{STEP_PREFIX}{name}": value
            for name, value in self.step_values(metrics).items()
        }
        values[f"{STEP_PREFIX}global_step"] = metrics.step
        self.tracker.log(values, step=metrics.step)

    def library_run_opened(self) -> None:
        """A library's own integration (TRL's callbacks) has opened the run again under
        its name, perhaps with a configuration of its own: add the run's (once, before
        the library logs anything)."""
        if not self._config_restored:
            self.tracker.restore_config()
            self._config_restored = True

    def add_to_library_log(self, logs: dict[str, Any], metrics: StepMetrics) -> None:
        """Add a step's values to the entry a library's own integration is about to log
        (it prefixes them with ``train/``, and held-out scores, named ``eval_...`` here,
        with ``eval/``); the step log's names win over the library's, so that they mean
        the same with every trainer."""
        for name, value in self.step_values(metrics).items():
            if name.startswith(EVAL_PREFIX):
                name = LIBRARY_EVAL_PREFIX + name.removeprefix(EVAL_PREFIX)
            logs[name] = value

    def finish(self) -> None:
        self.tracker.finish()


def tracking_keywords(adapter: Any, tracking: TrainTracking | None) -> dict[str, Any]:
    """``{"tracking": tracking}`` for an adapter whose ``train`` takes it (its library
    reports); ``{}`` otherwise, and then the command logs each step itself."""
    if tracking is None:
        return {}
    try:
        parameters = inspect.signature(adapter.train).parameters
    except (TypeError, ValueError):
        return {}
    return {"tracking": tracking} if "tracking" in parameters else {}
