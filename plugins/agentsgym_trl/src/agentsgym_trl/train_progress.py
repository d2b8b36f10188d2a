"""``agentsgym train``'s steps under progress bars, and the failures of its episodes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentsgym.cli import exit_on_failures, failure_report, print_failures, progress_bar
from agentsgym.runtime import RolloutSource, StepMetrics, TrainResult, redact_text


def quiet_progress_bars() -> None:
    """The CLI shows its own progress; silence the libraries' tqdm bars."""
    try:
        from huggingface_hub.utils import disable_progress_bars
        from transformers.utils import logging as hf_logging

        disable_progress_bars()
        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover - both ship with transformers
        pass


def describe(trainer: str, metrics: StepMetrics) -> str:
    """The steps bar's text after a step."""
    parts = [f"{trainer} step {metrics.step}"]
    if metrics.loss is not None:
        parts.append(f"loss {metrics.loss:.4g}")
    if metrics.mean_reward is not None:
        parts.append(f"reward {metrics.mean_reward:.3g}")
    if metrics.extra.get("skipped"):
        parts.append("nothing trained")
    return ", ".join(parts)


def train_with_progress(
    adapter: Any,
    source: RolloutSource,
    *,
    trainer: str,
    env_id: str,
    max_steps: int,
    episodes_per_step: int,
    player: Any,
    checkpointing: dict[str, Any],
    after_first_step: Callable[[StepMetrics], None] | None = None,
    also_on_step: Callable[[StepMetrics], None] | None = None,
    also_on_episode: Callable[[Any], None] | None = None,
) -> tuple[TrainResult, list[str | None]]:
    """Run ``adapter.train`` with a bar for the steps and one for the episodes; the
    result and every episode's error (``None`` for a success). ``after_first_step``
    hears of the first step this call runs (the pace of the run); ``also_on_step`` and
    ``also_on_episode`` of every step and every episode played (a tracker).

    When training fails with every episode failed (or too many), the episodes'
    failures are reported and the command exits 1: with no episode to learn from a
    trainer may fail in its own way, and what the user needs to hear is why the
    episodes failed. ``source`` and ``player`` are closed in any case.
    """
    errors: list[str | None] = []
    with progress_bar() as progress:
        steps_bar = progress.add_task(f"{trainer} on {redact_text(env_id)}", total=max_steps)
        episodes_bar = progress.add_task("episodes", total=max_steps * episodes_per_step)

        def on_episode(episode: Any) -> None:
            errors.append(episode.error)
            progress.advance(episodes_bar)
            if also_on_episode is not None:
                also_on_episode(episode)

        source.on_episode = on_episode

        first = [after_first_step]

        def on_step(metrics: StepMetrics) -> None:
            progress.update(
                steps_bar, completed=metrics.step, description=describe(trainer, metrics)
            )
            heard, first[0] = first[0], None
            if heard is not None:
                heard(metrics)
            if also_on_step is not None:
                also_on_step(metrics)

        try:
            result = adapter.train(
                source, max_steps=max_steps, on_step=on_step, agent=player, **checkpointing
            )
        except Exception:
            report = failure_report(errors)
            if not report.fails_run(None):
                raise
            progress.stop()
            print_failures(report)
            exit_on_failures(report, None)
            raise
        finally:
            source.close()
            closer = getattr(player, "close", None)
            if callable(closer):
                closer()
    return result, errors
