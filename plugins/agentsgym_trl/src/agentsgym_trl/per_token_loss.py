"""The per-token policy loss of ``per-token-grpo``, and the logprobs it scores.

Every agent token ``t`` gets the clipped policy-gradient objective
``-min(r * A, clip(r, 1-eps, 1+eps) * A)`` with ``r = pi / pi_old``, weighted by the
truncated importance ratio ``pi_old / pi_sample`` when the agent returned sampled
logprobs (:mod:`agentsgym_trl.importance`), plus ``beta`` times the KL estimate
``exp(ref - logp) - (ref - logp) - 1`` to a frozen reference model (TRL's estimator).
Masked positions are selected out before any arithmetic, so they add exactly nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import torch

LossAggregation = Literal["token", "sequence"]


def token_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    temperature: float = 1.0,
    *,
    entropy_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(B, T)`` log-probability of each token given the ones before it (column 0 is
    0), and the policy's entropy at the positions of ``entropy_mask`` (1-D, no grad)."""
    import torch

    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]
    if temperature not in (0.0, 1.0):
        logits = logits / temperature
    logps = torch.log_softmax(logits.float(), dim=-1)
    picked = logps.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    entropy = None
    if entropy_mask is not None:
        with torch.no_grad():
            at = logps.detach()[entropy_mask[:, 1:].bool()]
            entropy = -(at.exp() * at).sum(dim=-1)
    return torch.cat([picked.new_zeros(picked.shape[0], 1), picked], dim=1), entropy


def per_token_policy_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor,
    advantages: torch.Tensor,
    agent_mask: torch.Tensor,
    *,
    epsilon: float = 0.2,
    normalizer: torch.Tensor | float | None = None,
    is_weights: torch.Tensor | None = None,
    ref_logps: torch.Tensor | None = None,
    beta: float = 0.0,
    aggregation: LossAggregation = "token",
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Clipped per-token policy-gradient loss (+ ``beta`` * KL), and detached terms.

    Every tensor is ``(B, T)`` and aligned on the token axis (position ``t`` scores
    token ``t``). Positions with ``agent_mask == 0`` are selected out with
    ``torch.where`` before any arithmetic, so they add exactly zero to the loss and
    its gradient even when their values are not finite.

    :param normalizer: ``"token"``: the number of loss tokens of the whole batch
        (default: this call's); ``"sequence"``: the number of rows of the whole batch
        (default: this call's rows with a loss token).
    :return: ``(loss, terms)``; ``terms`` holds ``policy``, ``kl`` (sums over tokens),
        and the per-token ``ratio`` and ``clipped`` values at the loss tokens.
    """
    import torch

    mask = agent_mask.bool()
    zeros = torch.zeros_like(logps)
    # Select before any arithmetic, so a masked position is cut from the graph even
    # when its values are not finite (0 * nan would otherwise leak into the gradient).
    logps = torch.where(mask, logps, zeros)
    old_logps = torch.where(mask, old_logps, zeros)
    advantages = torch.where(mask, advantages, zeros)
    ratio = torch.exp(logps - old_logps)
    clipped = torch.clamp(ratio, 1.0 - epsilon, 1.0 + epsilon)
    policy = -torch.minimum(ratio * advantages, clipped * advantages)
    if is_weights is not None:
        policy = policy * is_weights
    per_token = policy
    kl = None
    if beta and ref_logps is not None:
        delta = torch.where(mask, ref_logps, zeros) - logps
        kl = torch.where(mask, torch.exp(delta) - delta - 1.0, zeros)
        per_token = per_token + beta * kl
    per_token = torch.where(mask, per_token, zeros)
    if aggregation == "sequence":
        counts = mask.sum(dim=-1)
        rows = per_token.sum(dim=-1) / counts.clamp(min=1)
        total = (counts > 0).sum().clamp(min=1) if normalizer is None else normalizer
        loss = rows.sum() / total
    else:
        total = mask.sum().clamp(min=1) if normalizer is None else normalizer
        loss = per_token.sum() / total
    with torch.no_grad():
        was_clipped = ((ratio < 1.0 - epsilon) & (advantages < 0)) | (
            (ratio > 1.0 + epsilon) & (advantages > 0)
        )
        terms = {
            "policy": torch.where(mask, policy, zeros).sum().detach(),
            "kl": (kl.sum() if kl is not None else zeros.sum()).detach(),
            "ratio": ratio[mask].detach(),
            "clipped": was_clipped[mask].float(),
        }
    return loss, terms
