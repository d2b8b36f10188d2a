"""The step log's summary of a set of values: ``PREFIX_mean/min/max/std``."""

from __future__ import annotations

from typing import Any


def spread(prefix: str, values: Any) -> dict[str, float]:
    """``PREFIX_mean``, ``_min``, ``_max`` and ``_std`` (population) of a 1-D tensor that
    is not empty."""
    values = values.float()
    return {
        f"{prefix}_mean": float(values.mean()),
        f"{prefix}_min": float(values.min()),
        f"{prefix}_max": float(values.max()),
        f"{prefix}_std": float(values.std(unbiased=False)),
    }
