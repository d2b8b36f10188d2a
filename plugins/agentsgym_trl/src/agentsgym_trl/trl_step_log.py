"""The step log of a ``trl-grpo`` run: what each rollout round played, completed by
TRL's log of the optimizer step that trained on it.

TRL drives the loop: it calls the ``rollout_func`` (which records the round's
:class:`~agentsgym.trainers.StepMetrics`), trains, then logs its own numbers through
a ``TrainerCallback``. :class:`StepLogCallback` joins the two into one entry per step
and adds agentsgym's run state to every checkpoint TRL saves. With ``--report-to``, it
also adds the step's entry to the logs TRL's tracker integration is about to report
(:func:`report_after_step_log` puts that integration after it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

from agentsgym.runtime import RolloutSource, StepCallback, StepMetrics

if TYPE_CHECKING:
    from agentsgym_trl.train_tracking import TrainTracking

TRL_METRICS = {
    # TRL's view of the rewards (a cut episode counted as a failure); ours are the env's
    "trl_reward": "reward",
    "trl_reward_std": "reward_std",
    "frac_reward_zero_std": "frac_reward_zero_std",
    "grad_norm": "grad_norm",
    "entropy": "entropy",
    "kl": "kl",
    "clip_fraction": "clip_ratio/region_mean",
    "clip_fraction_low": "clip_ratio/low_mean",
    "clip_fraction_high": "clip_ratio/high_mean",
    "sampling_logp_diff_mean": "sampling/sampling_logp_difference/mean",
    "sampling_logp_diff_max": "sampling/sampling_logp_difference/max",
    "completion_length": "completions/mean_length",
}
"""Step-log names (shared with per-token-grpo) of the TRL log entries kept."""


class StepLog:
    """The steps of a run, in order; ``on_step`` hears of each as it completes."""

    def __init__(self) -> None:
        self.steps: list[StepMetrics] = []
        self.on_step: StepCallback | None = None
        self.evaluate: StepCallback | None = None
        """Adds held-out scores to a step's entry when they are due (``--eval-steps``)."""
        self._played: list[StepMetrics] = []

    def played(self, metrics: StepMetrics) -> None:
        """A rollout round's metrics, waiting for the optimizer step that trains on it."""
        self._played.append(metrics)

    def trained(self, logs: dict[str, Any], step: int, scored: dict[str, float]) -> StepMetrics:
        """TRL logged optimizer step ``step``: complete the round it trained on (the
        step's entry, returned).

        :param scored: the trainer's statistics of the rows that reached the loss.
        """
        played, self._played = self._played, []
        metrics = played[-1] if played else StepMetrics(step=step)
        metrics.step = step
        loss = logs.get("loss")
        metrics.loss = float(loss) if loss is not None else None
        for ours, theirs in TRL_METRICS.items():
            value = logs.get(theirs)
            if isinstance(value, (int, float)) and math.isfinite(value):
                metrics.extra[ours] = float(value)
        metrics.extra.update(scored)
        if self.evaluate is not None:
            self.evaluate(metrics)
        self.steps.append(metrics)
        if self.on_step is not None:
            self.on_step(metrics)
        return metrics


class StepLogCallback(TrainerCallback):  # type: ignore[misc]
    """Turns TRL's per-step logs into :class:`StepMetrics`, and adds agentsgym's run
    state to each checkpoint TRL saves; with ``tracking``, adds each step's entry to
    the logs TRL reports to the tracker."""

    def __init__(
        self,
        step_log: StepLog,
        scored: Callable[[], dict[str, float]],
        source: RolloutSource | None = None,
        run_arguments: dict[str, Any] | None = None,
        tracking: TrainTracking | None = None,
    ) -> None:
        self.step_log = step_log
        self.scored = scored
        self.source = source
        self.run_arguments = run_arguments
        self.tracking = tracking

    def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        from agentsgym_trl.checkpoints import checkpoint_path, write_run_state

        write_run_state(
            checkpoint_path(args.output_dir, state.global_step),
            step=state.global_step,
            steps=self.step_log.steps,
            source=self.source,
            arguments=self.run_arguments,
        )

    def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        # TRL's tracker integration opened the run at train begin; nothing is logged yet
        if self.tracking is not None:
            self.tracking.library_run_opened()

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any
    ) -> None:
        if logs and "loss" in logs:
            metrics = self.step_log.trained(logs, state.global_step, self.scored())
            if self.tracking is not None:
                self.tracking.add_to_library_log(logs, metrics)


def report_after_step_log(trainer: Any) -> None:
    """Move TRL's tracker integrations (``report_to``) behind :class:`StepLogCallback`,
    so that the entry it adds to a step's logs is in what they report."""
    from transformers.integrations import get_reporting_integration_callbacks

    reporting = tuple(get_reporting_integration_callbacks(trainer.args.report_to))
    for callback in list(trainer.callback_handler.callbacks):
        if isinstance(callback, reporting):
            trainer.callback_handler.remove_callback(callback)
            trainer.callback_handler.add_callback(callback)
