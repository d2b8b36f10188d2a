"""A warning after the first step of ``agentsgym train`` when the run will be long.

A model that never ends its turn (the tiny random model, a model that has not learned
the env's format) writes ``--max-new-tokens`` tokens on every turn of every episode,
and an episode runs to ``max_steps_per_episode`` turns: a tool env at the defaults
plays tens of thousands of agent tokens per step. The first step shows the pace; the
warning says how long the rest will take and which options shorten it.
"""

from __future__ import annotations

from agentsgym.runtime import StepMetrics

SLOW_RUN_SECONDS = 120.0
"""Warn when the steps left would take longer than this at the first step's pace."""

QUICK_MAX_NEW_TOKENS = 16
QUICK_EPISODE_STEPS = 3


def pace_warning(
    metrics: StepMetrics,
    *,
    max_steps: int,
    max_new_tokens: int,
    max_steps_per_episode: int,
) -> str | None:
    """The warning after step ``metrics.step``, or ``None`` when the run is quick."""
    steps_left = max_steps - metrics.step
    seconds_left = metrics.seconds * steps_left
    if steps_left < 1 or seconds_left < SLOW_RUN_SECONDS:
        return None
    rollouts = max(metrics.num_rollouts, 1)
    cut = metrics.extra.get("truncated_replies", 0.0)
    played = (
        f"step {metrics.step} took {metrics.seconds:.0f}s: {metrics.num_agent_tokens:,} agent "
        f"tokens in {metrics.num_rollouts} rollouts ({metrics.num_agent_tokens / rollouts:,.0f} "
        f"per rollout, {cut:.0%} of the replies cut at --max-new-tokens {max_new_tokens})"
    )
    fixes = []
    if max_new_tokens > QUICK_MAX_NEW_TOKENS and cut > 0:
        fixes.append(f"--max-new-tokens {QUICK_MAX_NEW_TOKENS}")
    if max_steps_per_episode > QUICK_EPISODE_STEPS:
        fixes.append(f"--env-config max_steps_per_episode={QUICK_EPISODE_STEPS}")
    fixes.append("fewer --num-rollouts or --tasks-per-step")
    rest = "the step left takes" if steps_left == 1 else f"the {steps_left} steps left take"
    return (
        f"[bold yellow]slow run[/]: {played}; {rest} about {_duration(seconds_left)} at this "
        f"pace. For a quicker run: {', '.join(fixes)}."
    )


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
