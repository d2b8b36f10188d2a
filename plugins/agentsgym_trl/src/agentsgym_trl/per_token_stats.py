"""The step-log summaries of ``per-token-grpo``: advantages, ratios, entropy."""

from __future__ import annotations

import math
from typing import Any

from agentsgym_trl.spread import spread


def advantage_stats(values: Any) -> dict[str, float]:
    """Mean, std, min and max of the advantages of the loss tokens (none if empty)."""
    return spread("advantage", values) if values.numel() else {}


def loss_summary(stats: dict[str, list[Any]]) -> dict[str, float]:
    """The step log's entropy, clip fraction, policy ratios, importance ratios (raw,
    ``is_ratio_*``) and weights (as the loss applied them, ``is_weight_*``) and sampling
    gaps, from the detached terms the loss collected per micro-batch."""
    import torch

    def joined(name: str) -> Any:
        parts = [p for p in stats.get(name, []) if p.numel()]
        return torch.cat(parts) if parts else None

    out: dict[str, float] = {}
    if (entropy := joined("entropy")) is not None:
        out["entropy"] = float(entropy.mean())
    if (clipped := joined("clipped")) is not None:
        out["clip_fraction"] = float(clipped.mean())
    if (ratio := joined("ratio")) is not None:
        out.update(
            ratio_mean=float(ratio.mean()),
            ratio_min=float(ratio.min()),
            ratio_max=float(ratio.max()),
        )
    for name, prefix in (("ratios", "is_ratio"), ("weights", "is_weight")):
        if (values := joined(name)) is not None:
            out.update(spread(prefix, values))
    if (gaps := joined("gaps")) is not None:
        out.update(
            sampling_logp_diff_mean=float(gaps.mean()), sampling_logp_diff_max=float(gaps.max())
        )
    return {k: v for k, v in out.items() if math.isfinite(v)}
