"""``per-token-grpo``: per-token rewards as advantages, the agent mask in the loss.

This is the trainer the seed plans describe. It consumes the runner's padded batch
as is (``batch.to_torch()``): every row is the full token stream of an episode (or
of one view of it, for templates that are not prefix-preserving), and

* the advantage of each token is its per-token reward (``per_token_rewards``, as the
  env's ``reward_strategy`` assigned it), normalised within the task's group: minus
  the mean and over the standard deviation of the agent-token rewards of all
  rollouts of that task (``advantage_normalization="group"``; ``"none"`` uses the
  raw per-token rewards, a zero baseline);
* the loss is the clipped policy-gradient (PPO/GRPO) objective per token,
  ``-min(r * A, clip(r, 1-eps, 1+eps) * A)`` with ``r = pi / pi_old``, averaged over
  the tokens where ``agent_token_mask`` is 1. Environment tokens (prompts,
  observations, template tokens) and padding contribute exactly nothing.

Each step plays ``tasks_per_step * num_rollouts`` rollouts with the trainer's own
model (a :class:`~agentsgym.agents.transformers_agent.TransformersAgent` sharing its
weights), then takes ``num_iterations`` optimizer steps on them.

Use it when the env shapes rewards per step (``reward_shaping`` terms, per-turn
rewards) and you want those to reach the turns that earned them; use ``trl-grpo``
for an outcome reward per episode and TRL's full GRPO machinery.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentsgym.trainers.base import BatchTrainer, TrainResult, policy_sampling
from agentsgym.trajectory import TrajectoryBatch

if TYPE_CHECKING:
    import torch

    from agentsgym.agents.transformers_agent import TransformersAgent

logger = logging.getLogger(__name__)

Normalization = Literal["group", "none"]


def group_normalized_advantages(
    rewards: torch.Tensor,
    agent_mask: torch.Tensor,
    group_indices: torch.Tensor,
    *,
    normalization: Normalization = "group",
    eps: float = 1e-4,
) -> torch.Tensor:
    """Per-token advantages: rewards normalised over each group's agent tokens.

    :param rewards: ``(B, T)`` per-token rewards.
    :param agent_mask: ``(B, T)``, 1 on agent tokens.
    :param group_indices: ``(B,)``, the group (task) of each row.
    :return: ``(B, T)``; exactly 0 wherever ``agent_mask`` is 0.
    """
    import torch

    mask = agent_mask.bool()
    advantages = torch.zeros_like(rewards, dtype=torch.float32)
    if normalization == "none":
        return torch.where(mask, rewards.float(), advantages)
    if normalization != "group":
        raise ValueError(
            f"advantage_normalization must be 'group' or 'none', got {normalization!r}"
        )
    for group in group_indices.unique():
        rows = group_indices == group
        values = rewards[rows][mask[rows]].float()
        if values.numel() == 0:
            continue
        mean = values.mean()
        std = values.std(unbiased=False) if values.numel() > 1 else values.new_tensor(0.0)
        normalised = (rewards[rows].float() - mean) / (std + eps)
        advantages[rows] = torch.where(mask[rows], normalised, advantages[rows])
    return advantages


def token_logprobs(
    model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """``(B, T)`` log-probability of each token given the ones before it (column 0 is 0)."""
    import torch

    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]
    if temperature not in (0.0, 1.0):
        logits = logits / temperature
    logps = torch.log_softmax(logits.float(), dim=-1)
    picked = logps.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return torch.cat([picked.new_zeros(picked.shape[0], 1), picked], dim=1)


def per_token_policy_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor,
    advantages: torch.Tensor,
    agent_mask: torch.Tensor,
    *,
    epsilon: float = 0.2,
    normalizer: torch.Tensor | float | None = None,
) -> torch.Tensor:
    """Clipped per-token policy-gradient loss, averaged over agent tokens.

    Every tensor is ``(B, T)`` and aligned on the token axis (position ``t`` scores
    token ``t``). Positions with ``agent_mask == 0`` are selected out with
    ``torch.where`` before any arithmetic, so they add exactly zero to the loss and
    its gradient.
    """
    import torch

    mask = agent_mask.bool()
    # Select before any arithmetic, so a masked position is cut from the graph even
    # when its values are not finite (0 * nan would otherwise leak into the gradient).
    logps = torch.where(mask, logps, torch.zeros_like(logps))
    old_logps = torch.where(mask, old_logps, torch.zeros_like(old_logps))
    advantages = torch.where(mask, advantages, torch.zeros_like(advantages))
    ratio = torch.exp(logps - old_logps)
    clipped = torch.clamp(ratio, 1.0 - epsilon, 1.0 + epsilon)
    per_token = -torch.minimum(ratio * advantages, clipped * advantages)
    total = mask.sum().clamp(min=1) if normalizer is None else normalizer
    return per_token.sum() / total


class PerTokenGRPOTrainer(BatchTrainer):
    """Trains a local causal LM on per-token rewards (see the module docstring).

    :param model: a model folder, a loaded ``PreTrainedModel``, or ``"tiny"``.
    :param tokenizer: default: the model folder's (the bundled one for ``"tiny"``).
    :param output_dir: where the trained model is saved (``None``: not saved).
    :param learning_rate: AdamW learning rate.
    :param epsilon: PPO clipping range.
    :param num_iterations: optimizer steps per batch of rollouts (1: on-policy).
    :param micro_batch_size: rows per forward/backward pass (gradient accumulation).
    :param advantage_normalization: ``"group"`` or ``"none"``.
    :param temperature, top_p, top_k, max_new_tokens: sampling of the policy agent;
        the loss scores tokens at the same temperature.
    :param seed: seeds the policy's sampling.
    :param agent_batch_size: prompts the policy generates together.
    """

    def __init__(
        self,
        model: Any = None,
        *,
        tokenizer: Any = None,
        output_dir: str | Path | None = "agentsgym-per-token",
        learning_rate: float = 1e-5,
        weight_decay: float = 0.0,
        max_grad_norm: float = 1.0,
        epsilon: float = 0.2,
        num_iterations: int = 1,
        micro_batch_size: int = 8,
        advantage_normalization: Normalization = "group",
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        max_new_tokens: int = 256,
        seed: int = 0,
        agent_batch_size: int = 8,
        device: str | None = None,
    ) -> None:
        import torch

        from agentsgym.agents.transformers_agent import load_model

        if model is None:
            raise ValueError("per-token-grpo needs a model (a folder, a loaded model, or 'tiny')")
        if num_iterations < 1 or micro_batch_size < 1:
            raise ValueError("num_iterations and micro_batch_size must be at least 1")
        self.model, self.tokenizer = load_model(model, tokenizer, device=device)
        self.output_dir = Path(output_dir) if output_dir is not None else None
        self.max_grad_norm = max_grad_norm
        self.epsilon = epsilon
        self.num_iterations = num_iterations
        self.micro_batch_size = micro_batch_size
        self.advantage_normalization: Normalization = advantage_normalization
        self.temperature = temperature
        self.sampling = policy_sampling(
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            max_new_tokens=max_new_tokens,
            seed=seed,
            batch_size=agent_batch_size,
        )
        self.optimizer = torch.optim.AdamW(
            [p for p in self.model.parameters() if p.requires_grad],
            lr=learning_rate,
            weight_decay=weight_decay,
        )
        self._agent: TransformersAgent | None = None

    def policy(self) -> TransformersAgent:
        """A transformers agent generating with this trainer's (current) weights."""
        if self._agent is None:
            from agentsgym.agents.transformers_agent import TransformersAgent

            self._agent = TransformersAgent(self.model, tokenizer=self.tokenizer, **self.sampling)
        return self._agent

    def prepare(self, batch: TrajectoryBatch) -> dict[str, torch.Tensor]:
        """The batch's tensors plus group-normalised ``advantages``, on the model's device."""
        tensors = batch.to_torch()
        tensors["advantages"] = group_normalized_advantages(
            tensors["per_token_rewards"],
            tensors["agent_token_mask"],
            tensors["group_indices"],
            normalization=self.advantage_normalization,
        )
        device = self.model.device
        return {k: v.to(device) for k, v in tensors.items()}

    def loss(
        self,
        tensors: dict[str, torch.Tensor],
        old_logps: torch.Tensor | None = None,
        normalizer: torch.Tensor | float | None = None,
    ) -> torch.Tensor:
        """The loss of (a micro-batch of) prepared tensors, with the graph attached."""
        logps = token_logprobs(
            self.model, tensors["input_ids"], tensors["attention_mask"], self.temperature
        )
        old = logps.detach() if old_logps is None else old_logps
        return per_token_policy_loss(
            logps,
            old,
            tensors["advantages"],
            tensors["agent_token_mask"],
            epsilon=self.epsilon,
            normalizer=normalizer,
        )

    def consume(self, batch: TrajectoryBatch) -> dict[str, float]:
        import torch

        if len(batch) == 0:
            logger.warning("no completed rollout in this batch; skipping the update")
            return {"loss": float("nan"), "skipped": 1.0}
        tensors = self.prepare(batch)
        rows = tensors["input_ids"].shape[0]
        chunks = [
            slice(start, min(start + self.micro_batch_size, rows))
            for start in range(0, rows, self.micro_batch_size)
        ]
        total_tokens = tensors["agent_token_mask"].sum().clamp(min=1)
        old_logps: list[torch.Tensor | None] = [None] * len(chunks)
        if self.num_iterations > 1:
            with torch.no_grad():
                old_logps = [
                    token_logprobs(
                        self.model,
                        tensors["input_ids"][c],
                        tensors["attention_mask"][c],
                        self.temperature,
                    )
                    for c in chunks
                ]
        self.model.train()
        losses: list[float] = []
        grad_norm = 0.0
        for _ in range(self.num_iterations):
            self.optimizer.zero_grad(set_to_none=True)
            step_loss = 0.0
            for chunk, old in zip(chunks, old_logps):
                part = {k: v[chunk] for k, v in tensors.items()}
                loss = self.loss(part, old, normalizer=total_tokens)
                loss.backward()
                step_loss += float(loss.detach())
            grad_norm = float(
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
            )
            self.optimizer.step()
            losses.append(step_loss)
        self.model.eval()
        advantages = tensors["advantages"][tensors["agent_token_mask"].bool()]
        return {
            "loss": losses[-1],
            "grad_norm": grad_norm,
            "advantage_abs_mean": float(advantages.abs().mean()) if advantages.numel() else 0.0,
        }

    def finish(self, result: TrainResult) -> None:
        if self._agent is not None:
            self._agent.close()
        if self.output_dir is None:
            return
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(self.output_dir)
        self.tokenizer.save_pretrained(self.output_dir)
        result.artifacts["model"] = str(self.output_dir)
