"""The closing output of ``agentsgym train``: the summary table, and what to change
when nothing could be learned."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path

import typer
from rich.table import Table

from agentsgym.cli import console
from agentsgym.runtime import TrainResult


def print_summary(
    result: TrainResult,
    seconds: float,
    log_path: Path,
    *,
    played: Path | None = None,
    env_id: str | None = None,
) -> None:
    """The summary table, what nothing learned means, and how to look at the episodes.

    :param played: the file of the played rollouts (see :mod:`.played_rollouts`).
    :param env_id: the env trained on, for advice that fits it.
    """
    table = Table(title=f"{result.num_steps} steps in {seconds:.1f}s")
    table.add_column("", justify="left")
    table.add_column("value", justify="right")
    rewards = [s.mean_reward for s in result.steps if s.mean_reward is not None]
    signal = RewardSignal.of(result)
    rows: list[tuple[str, str]] = [("steps", str(result.num_steps))]
    if result.final_loss is not None:
        rows.append(("final loss", f"{result.final_loss:.6g}"))
    if rewards:
        rows.append(("mean reward", f"{statistics.fmean(rewards):.4g}"))
        rows.append(("reward, first -> last step", f"{rewards[0]:.3g} -> {rewards[-1]:.3g}"))
    rows.append(("rollouts", str(sum(s.num_rollouts for s in result.steps))))
    failed = sum(s.num_failed for s in result.steps)
    rows.append(("failed episodes", str(failed)))
    unscored = sum(s.num_reward_unavailable for s in result.steps)
    if unscored:
        rows.append(("  of them without a reward (a judge failed)", str(unscored)))
    rows.extend(signal.rows())
    stale = stale_steps(result)
    discarded = sum(int(s.extra.get("groups_discarded", 0)) for s in result.steps)
    if discarded:
        rows.append(("groups discarded (too old)", str(discarded)))
    for name, path in sorted(result.artifacts.items()):
        rows.append((name, path))
    rows.append(("step log", str(log_path)))
    if played is not None:
        rows.append(("rollouts played", str(played)))
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
    if result.final_loss is not None:  # a trainer that learns, not a sink
        verdict = signal.verdict(env_id)
        if verdict:
            console.print(verdict, soft_wrap=True)
    if stale:
        console.print(
            f"[bold yellow]{len(stale)} of {result.num_steps} steps trained nothing[/] "
            f"(step {', '.join(map(str, stale))}): every group they played was more than "
            "--max-staleness versions old when its step came, and was discarded. The "
            "agent that plays must take the trained weights (its replies say which "
            "version of them they came from), or raise --max-staleness.",
            soft_wrap=True,
        )
    if played is not None:
        console.print(f"see what training played: agentsgym view {played}", soft_wrap=True)
    loss = result.final_loss
    if loss is not None and not math.isfinite(loss):
        console.print("[bold red]the loss is not finite[/]; lower --learning-rate")
        raise typer.Exit(1)


def stale_steps(result: TrainResult) -> list[int]:
    """The steps of an ``--async`` run whose groups were all discarded as too old."""
    return [
        s.step
        for s in result.steps
        if s.extra.get("groups_discarded", 0) > 0 and s.num_rollouts == 0
    ]


@dataclass
class RewardSignal:
    """Whether a run had anything to learn from, summed over the steps that report it
    (``groups`` and ``groups_with_signal`` in the step log, see
    :func:`agentsgym_trl.screening.reward_signal`). A loss of 0 and an unchanged
    reward say nothing by themselves; this says why."""

    reported_steps: int = 0
    groups: int = 0
    groups_with_signal: int = 0
    steps_with_signal: int = 0
    rollouts: int = 0
    masked_rollouts: int | None = None

    @classmethod
    def of(cls, result: TrainResult) -> RewardSignal:
        signal = cls()
        for step in result.steps:
            if "masked_rollouts" in step.extra:
                masked = int(step.extra["masked_rollouts"])
                signal.masked_rollouts = (signal.masked_rollouts or 0) + masked
            if "groups" not in step.extra:
                continue
            with_signal = int(step.extra.get("groups_with_signal", 0))
            signal.reported_steps += 1
            signal.groups += int(step.extra["groups"])
            signal.groups_with_signal += with_signal
            signal.steps_with_signal += int(with_signal > 0)
            signal.rollouts += step.num_rollouts
        return signal

    def rows(self) -> list[tuple[str, str]]:
        if not self.reported_steps:
            return [("groups with differing rewards", "not reported by this trainer")]
        counts = (
            f"{self.groups_with_signal} of {self.groups} "
            f"(in {self.steps_with_signal} of {self.reported_steps} steps)"
        )
        rows = [("groups with differing rewards", counts)]
        if self.masked_rollouts is not None:
            rows.append(
                ("rollouts masked (a reply cut)", f"{self.masked_rollouts} of {self.rollouts}")
            )
        return rows

    def verdict(self, env_id: str | None = None) -> str | None:
        """One line when no step could learn anything, saying why and what to change
        (for ``env_id``, the env trained on)."""
        if not self.reported_steps:
            return None
        if self.groups_with_signal == 0:
            return (
                "[bold yellow]no learning signal[/]: in every group all rollouts got the "
                "same reward, so every advantage was 0 and no step moved the policy (a "
                "smoke run of the plumbing). To learn, the model must win some rollouts of "
                f"a task and lose others: {_a_model_that_wins(env_id)}, an easier "
                "--env-config, more --num-rollouts or a higher --temperature."
            )
        if self.masked_rollouts is not None and self.masked_rollouts >= self.rollouts > 0:
            return (
                "[bold yellow]no learning signal[/]: every rollout held a reply cut at "
                "--max-new-tokens, and such rollouts are masked out of the loss; raise "
                "--max-new-tokens (or pass --trainer-option mask_truncated_completions=false)."
            )
        return None


def _a_model_that_wins(env_id: str | None) -> str:
    """Where to find a model that sometimes wins at ``env_id``."""
    from agentsgym_trl.tiny_model import WARM_STARTS

    warm = [name for name, warm_env in WARM_STARTS.items() if warm_env == env_id]
    if warm:
        return (
            "start from a model that sometimes wins (e.g. the tiny model warm-started on "
            f"this env: `python -m agentsgym_trl.tiny_model tiny-model --warm-start {warm[0]}`, "
            "see docs/training.md)"
        )
    on = f" at {env_id}" if env_id else ""
    return (
        f"start from a model that sometimes wins{on} (the tiny random model hardly ever "
        "does, and its warm starts teach other envs' formats: try a real model, e.g. "
        "--model smollm2, or smollm2-tools for a tool env; see docs/training.md)"
    )
