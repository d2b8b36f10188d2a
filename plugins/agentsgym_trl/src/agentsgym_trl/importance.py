"""Importance sampling against the sampler's own logprobs (``per-token-grpo``).

The clipped objective compares the policy being trained with ``pi_old``, the
trainer's own scoring of the tokens before the update. The tokens were *sampled*
from another distribution, though: the agent's (the transformers agent's after its
temperature/top-k/top-p processing, vLLM's, a server's), which differs from
``pi_old`` by numerics, by sampling processors, or by weights a step behind. When the
agent returned sampled logprobs, each token's loss is weighted by the truncated
importance ratio ``min(pi_old / pi_sample, cap)`` (truncated importance sampling,
the correction TRL applies for vLLM, here for any sampler):

* ``"token"`` (default): one ratio per token;
* ``"sequence"``: one per row, the product of its tokens' ratios;
* ``"none"``: no correction.

A token whose sampled logprob is unknown (``NaN``, or an episode without logprobs)
gets weight 1. The step log reports the raw ratios ``pi_old / pi_sample``, before the
cap (``is_ratio_*``), the weights the loss applied, after it (``is_weight_*``), and
the gap ``|log pi_old - log pi_sample|`` (``sampling_logp_diff_*``): a gap far above
zero with an on-policy agent means the sampler and the trainer do not score tokens
alike (a different temperature, a different model).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, get_args

from agentsgym.errors import TrainerOptionError

if TYPE_CHECKING:
    import torch

ImportanceSampling = Literal["token", "sequence", "none"]


def check_importance_options(level: str, cap: float) -> None:
    if level not in get_args(ImportanceSampling):
        raise TrainerOptionError(
            f"importance_sampling must be one of {', '.join(get_args(ImportanceSampling))}, "
            f"got {level!r}"
        )
    if not cap >= 1.0:
        raise TrainerOptionError(f"importance_sampling_cap must be at least 1, got {cap}")


def importance_weights(
    old_logps: torch.Tensor,
    sampled_logps: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    level: ImportanceSampling = "token",
    cap: float = 3.0,
) -> tuple[torch.Tensor | None, dict[str, torch.Tensor]]:
    """Detached weights (``(B, T)`` or ``(B, 1)``, or ``None`` for ``"none"`` or when
    no logprob is known) and their statistics (1-D): ``ratios`` (raw, before the cap),
    ``weights`` (as applied, after it) and ``gaps``."""
    import torch

    known = loss_mask.bool() & torch.isfinite(sampled_logps)
    stats: dict[str, torch.Tensor] = {}
    if level == "none" or not bool(known.any()):
        return None, stats
    diff = torch.where(known, old_logps.detach() - sampled_logps, torch.zeros_like(old_logps))
    stats["gaps"] = diff[known].abs()
    if level == "token":
        ratio = torch.exp(diff)
        weights = torch.where(known, ratio.clamp(max=cap), torch.ones_like(ratio))
        stats["ratios"], stats["weights"] = ratio[known], weights[known]
    else:
        ratio = torch.exp(diff.sum(dim=-1, keepdim=True))
        weights = ratio.clamp(max=cap)
        rows = known.any(dim=-1)
        stats["ratios"], stats["weights"] = ratio[rows].flatten(), weights[rows].flatten()
    return weights.detach(), stats
