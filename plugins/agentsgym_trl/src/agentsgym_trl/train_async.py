"""``agentsgym train --async --max-staleness K``: the keyword an adapter's ``train`` gets."""

from __future__ import annotations

import inspect
from typing import Any

from agentsgym.errors import TrainerOptionError
from agentsgym_trl.batch_trainer import BatchTrainer


def stream_keywords(
    adapter: Any, trainer: str, *, enabled: bool, max_staleness: int
) -> dict[str, Any]:
    """``{"max_staleness": K}`` for an adapter that trains from a rollout stream; ``{}``
    without ``--async``. An adapter that cannot is refused with what to do instead."""
    if not enabled:
        return {}
    if max_staleness < 0:
        raise TrainerOptionError(f"--max-staleness must be >= 0, got {max_staleness}")
    try:
        parameters = inspect.signature(adapter.train).parameters
    except (TypeError, ValueError):
        parameters = {}
    if not isinstance(adapter, BatchTrainer) and "max_staleness" not in parameters:
        raise TrainerOptionError(
            f"trainer {trainer} does not train from a rollout stream; use --trainer "
            "per-token-grpo or trl-grpo with --async, or drop --async"
        )
    return {"max_staleness": max_staleness}
