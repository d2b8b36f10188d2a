"""``per-token-grpo``: per-turn credit, the agent mask in the loss, every view trained.

A small torch loop over the runner's padded batch (``batch.padded_arrays()``): every
row is the token stream of an episode, or of one view of it for a chat template that
is not prefix-preserving (each view's agent tokens are trained; nothing is dropped).

* **Advantages** (:mod:`agentsgym_trl.credit`): every token of turn ``t`` gets
  the turn's score, by default its discounted return-to-go ``G_t`` (``gamma``),
  normalised within the task's group over turns (each turn counted once, so there is
  no length bias). ``credit_assignment`` also offers the turn's own reward, the
  episode's outcome, or the env's ``per_token_rewards``.
* **Loss** per agent token: the clipped policy-gradient objective
  ``-min(r * A, clip(r, 1-eps, 1+eps) * A)`` with ``r = pi / pi_old``, weighted by
  the truncated importance ratio ``pi_old / pi_sample`` when the agent returned
  sampled logprobs (:mod:`agentsgym_trl.importance`), plus ``beta`` times the
  KL estimate ``exp(ref - logp) - (ref - logp) - 1`` to a frozen copy of the initial
  model (TRL's estimator; ``beta=0.0``, TRL's default, skips the reference model).
  ``loss_aggregation="token"`` (default) averages over all agent tokens of the batch,
  each token weighing the same; ``"sequence"`` averages within each row first
  (GRPO's original form, in which a long reply's tokens weigh less).
  The loss lives in :mod:`agentsgym_trl.per_token_loss`.
* Environment tokens (prompts, observations, template tokens), padding, episodes
  masked for a truncated reply (see :mod:`agentsgym_trl.screening`) add
  exactly nothing: masked positions are selected out before any arithmetic. The
  rows and masks a batch gives come from :mod:`agentsgym_trl.per_token_batch`.

Each step plays ``tasks_per_step * num_rollouts`` rollouts with the trainer's own
model (a :class:`~agentsgym_trl.transformers_agent.TransformersAgent` sharing its
weights), then takes ``num_iterations`` optimizer steps on them. The step log holds
``loss`` (what was backpropagated), ``policy_loss``, ``kl``, ``entropy``,
``clip_fraction``, ``ratio_mean/min/max``, ``is_ratio_*`` (the importance ratios,
raw), ``is_weight_*`` (as the loss applied them, capped), ``sampling_logp_diff_*``,
``advantage_mean/std/min/max``, ``grad_norm``, ``reward_std`` and the rollout counts.
With one iteration the policy ratio is 1 and the policy loss is ``-mean(A)`` over
tokens: not zero (turns of different lengths weigh differently), but it is the
reward, KL, entropy and clip fraction that tell how a run goes.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import random
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import numpy as np

from agentsgym import TrajectoryBatch
from agentsgym.errors import TrainerOptionError
from agentsgym.runtime import TrainResult
from agentsgym_trl.batch_trainer import BatchTrainer, policy_sampling
from agentsgym_trl.chat_templates import apply_chat_template_choice, check_source_template
from agentsgym_trl.credit import CreditAssignment, Normalization, check_credit_options
from agentsgym_trl.importance import (
    ImportanceSampling,
    check_importance_options,
    importance_weights,
)
from agentsgym_trl.per_token_batch import batch_arrays
from agentsgym_trl.per_token_loss import LossAggregation, per_token_policy_loss, token_logprobs
from agentsgym_trl.per_token_stats import advantage_stats, loss_summary
from agentsgym_trl.screening import RetokenizedPolicy, RolloutScreen

if TYPE_CHECKING:
    import torch

    from agentsgym.runtime import RolloutSource, StepCallback
    from agentsgym_trl.transformers_agent import TransformersAgent

logger = logging.getLogger(__name__)

TRAINER_STATE_FILE = "trainer_state.pt"
"""The optimizer, KL reference and RNG states in a per-token-grpo checkpoint."""


class PerTokenGRPOTrainer(BatchTrainer):
    """Trains a local causal LM on per-turn credit (see the module docstring).

    :param model: a model folder, a loaded ``PreTrainedModel``, or ``"tiny"``.
    :param tokenizer: default: the model folder's (the bundled one for ``"tiny"``).
    :param output_dir: where the trained model is saved (``None``: not saved).
    :param learning_rate: AdamW learning rate.
    :param epsilon: PPO clipping range.
    :param beta: KL coefficient to the initial model (0.0, TRL's default: no
        reference model is kept).
    :param credit_assignment: ``"return_to_go"`` (default), ``"turn"``, ``"episode"``
        or ``"token_rewards"`` (see :mod:`agentsgym_trl.credit`).
    :param gamma: discount of ``"return_to_go"`` (1.0).
    :param advantage_normalization: ``"group"`` (default), ``"mean"`` or ``"none"``.
    :param loss_aggregation: ``"token"`` (default) or ``"sequence"``.
    :param importance_sampling: ``"token"`` (default), ``"sequence"`` or ``"none"``
        (see :mod:`agentsgym_trl.importance`).
    :param importance_sampling_cap: truncation of the importance ratio (3.0).
    :param num_iterations: optimizer steps per batch of rollouts (1: on-policy).
    :param micro_batch_size: rows per forward/backward pass (gradient accumulation).
    :param temperature, top_p, top_k, max_new_tokens: sampling of the policy agent;
        the loss scores tokens at the same temperature.
    :param seed: seeds the policy's sampling.
    :param agent_batch_size: prompts the policy generates together.
    :param chat_template: ``"model"``, ``"training"`` or a ``.jinja`` path (see
        :mod:`agentsgym_trl.chat_templates`).
    :param on_retokenized: ``"warn"`` (default), ``"error"``, ``"drop"``, ``"allow"``.
    :param mask_truncated_completions: ``None`` (default: in multi-turn envs), True,
        False (see :mod:`agentsgym_trl.screening`).
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
        beta: float = 0.0,
        credit_assignment: CreditAssignment = "return_to_go",
        gamma: float = 1.0,
        advantage_normalization: Normalization = "group",
        loss_aggregation: LossAggregation = "token",
        importance_sampling: ImportanceSampling = "token",
        importance_sampling_cap: float = 3.0,
        num_iterations: int = 1,
        micro_batch_size: int = 8,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        max_new_tokens: int = 256,
        seed: int = 0,
        agent_batch_size: int = 8,
        device: str | None = None,
        chat_template: str | None = None,
        on_retokenized: RetokenizedPolicy = "warn",
        mask_truncated_completions: bool | None = None,
    ) -> None:
        import torch

        from agentsgym_trl.transformers_agent import load_model

        if model is None:
            raise TrainerOptionError(
                "per-token-grpo needs a model (a folder, a loaded model, or 'tiny')"
            )
        if num_iterations < 1 or micro_batch_size < 1:
            raise TrainerOptionError("num_iterations and micro_batch_size must be at least 1")
        if beta < 0:
            raise TrainerOptionError(f"beta must be >= 0, got {beta}")
        if loss_aggregation not in get_args(LossAggregation):
            raise TrainerOptionError(
                f"loss_aggregation must be 'token' or 'sequence', got {loss_aggregation!r}"
            )
        check_credit_options(credit_assignment, gamma, advantage_normalization)
        check_importance_options(importance_sampling, importance_sampling_cap)
        self.model, self.tokenizer = load_model(model, tokenizer, device=device)
        self.chat_template = chat_template
        self.tokenizer, self.chat_template_source = apply_chat_template_choice(
            self.tokenizer, chat_template
        )
        self.screen = RolloutScreen(
            on_retokenized, mask_truncated_completions, trainer="per-token-grpo"
        )
        self.output_dir = Path(output_dir) if output_dir is not None else None
        self.max_grad_norm = max_grad_norm
        self.epsilon = epsilon
        self.beta = float(beta)
        self.credit_assignment: CreditAssignment = credit_assignment
        self.gamma = float(gamma)
        self.advantage_normalization: Normalization = advantage_normalization
        self.loss_aggregation: LossAggregation = loss_aggregation
        self.importance_sampling: ImportanceSampling = importance_sampling
        self.importance_sampling_cap = float(importance_sampling_cap)
        self.num_iterations = num_iterations
        self.micro_batch_size = micro_batch_size
        self.temperature = temperature
        self.sampling = policy_sampling(
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            max_new_tokens=max_new_tokens,
            seed=seed,
            batch_size=agent_batch_size,
        )
        self.ref_model: Any = None
        if self.beta:
            self.ref_model = copy.deepcopy(self.model).eval()
            self.ref_model.requires_grad_(False)
        self.optimizer = torch.optim.AdamW(
            [p for p in self.model.parameters() if p.requires_grad],
            lr=learning_rate,
            weight_decay=weight_decay,
        )
        self._agent: TransformersAgent | None = None

    def policy(self) -> TransformersAgent:
        """A transformers agent generating with this trainer's (current) weights."""
        if self._agent is None:
            from agentsgym_trl.transformers_agent import TransformersAgent

            self._agent = TransformersAgent(self.model, tokenizer=self.tokenizer, **self.sampling)
        return self._agent

    def trained_model(self) -> Any:
        return self.model

    @contextlib.contextmanager
    def weight_update(self, version: int) -> Iterator[None]:
        """The policy agent generates no batch while the weights change; its replies
        then carry ``version``."""
        with self.policy().updating_weights(version):
            yield

    def train(
        self,
        source: RolloutSource,
        *,
        max_steps: int,
        on_step: StepCallback | None = None,
        agent: Any = None,
        **checkpointing: Any,
    ) -> TrainResult:
        """See :meth:`BatchTrainer.train` (``save_steps``, ``resume_from``, ...)."""
        check_source_template(source, self.tokenizer, self.chat_template)
        return super().train(
            source, max_steps=max_steps, on_step=on_step, agent=agent, **checkpointing
        )

    # ------------------------------------------------------------------ checkpoints
    def save_state(self, folder: Path) -> None:
        """The model (loadable with ``from_pretrained``), the optimizer, the KL
        reference model and the RNG states."""
        import torch

        folder.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)
        torch.save(
            {
                "optimizer": self.optimizer.state_dict(),
                "reference": self.ref_model.state_dict() if self.ref_model is not None else None,
                "torch_rng": torch.get_rng_state(),
                "python_rng": random.getstate(),
            },
            folder / TRAINER_STATE_FILE,
        )

    def load_state(self, folder: Path) -> None:
        import torch

        saved = type(self.model).from_pretrained(folder)
        self.model.load_state_dict(saved.state_dict())
        del saved
        state = torch.load(folder / TRAINER_STATE_FILE, weights_only=False)
        self.optimizer.load_state_dict(state["optimizer"])
        if self.ref_model is not None and state.get("reference") is not None:
            self.ref_model.load_state_dict(state["reference"])
        torch.set_rng_state(state["torch_rng"])
        random.setstate(state["python_rng"])

    # ------------------------------------------------------------------ the batch
    def prepare(self, batch: TrajectoryBatch) -> dict[str, torch.Tensor]:
        """The tensors of the rows that train, on the model's device.

        ``input_ids``, ``attention_mask``, ``agent_token_mask`` (the episodes' own
        masks), ``loss_mask`` (the agent mask minus masked episodes), ``advantages``,
        ``sampled_logprobs`` (``NaN`` where unknown) and ``group_indices``. Rows of
        episodes the re-tokenized policy drops are left out.
        """
        import torch

        multi_turn = self.source.is_multi_turn if self.source is not None else None
        arrays, self._screened = batch_arrays(
            batch,
            self.screen,
            multi_turn=multi_turn,
            credit=self.credit_assignment,
            gamma=self.gamma,
            normalization=self.advantage_normalization,
            bound=self.staleness,
        )
        device = self.model.device
        return {k: torch.from_numpy(np.ascontiguousarray(v)).to(device) for k, v in arrays.items()}

    def loss(
        self,
        tensors: dict[str, torch.Tensor],
        old_logps: torch.Tensor | None = None,
        normalizer: torch.Tensor | float | None = None,
        ref_logps: torch.Tensor | None = None,
        *,
        stats: dict[str, list[torch.Tensor]] | None = None,
    ) -> torch.Tensor:
        """The loss of (a micro-batch of) prepared tensors, with the graph attached.

        ``old_logps`` default to this forward pass's, detached (one iteration);
        ``ref_logps`` are computed when ``beta > 0`` and not given. ``stats``, when
        given, collects the detached terms for the step log.
        """
        import torch

        mask = tensors.get("loss_mask", tensors["agent_token_mask"])
        logps, entropy = token_logprobs(
            self.model,
            tensors["input_ids"],
            tensors["attention_mask"],
            self.temperature,
            entropy_mask=mask if stats is not None else None,
        )
        old = logps.detach() if old_logps is None else old_logps
        weights, is_stats = (
            importance_weights(
                old,
                tensors["sampled_logprobs"],
                mask,
                level=self.importance_sampling,
                cap=self.importance_sampling_cap,
            )
            if "sampled_logprobs" in tensors
            else (None, {})
        )
        if self.beta and ref_logps is None:
            with torch.no_grad():
                ref_logps = token_logprobs(
                    self.ref_model,
                    tensors["input_ids"],
                    tensors["attention_mask"],
                    self.temperature,
                )[0]
        loss, terms = per_token_policy_loss(
            logps,
            old,
            tensors["advantages"],
            mask,
            epsilon=self.epsilon,
            normalizer=normalizer,
            is_weights=weights,
            ref_logps=ref_logps,
            beta=self.beta,
            aggregation=self.loss_aggregation,
        )
        if stats is not None:
            for name, value in {**terms, **is_stats}.items():
                stats.setdefault(name, []).append(value.reshape(-1).float().cpu())
            if entropy is not None:
                stats.setdefault("entropy", []).append(entropy.float().cpu())
        return loss

    def consume(self, batch: TrajectoryBatch) -> dict[str, float]:
        """``num_iterations`` optimizer steps on the batch (see the module docstring)."""
        import torch

        if len(batch) == 0:
            logger.warning("no completed rollout in this batch; skipping the update")
            return {"skipped": 1.0}  # no loss: nothing was computed
        tensors = self.prepare(batch)
        rows = tensors["input_ids"].shape[0]
        mask = tensors["loss_mask"]
        total_tokens = mask.sum()
        metrics: dict[str, float] = dict(self._screened)
        metrics.update(advantage_stats(tensors["advantages"][mask.bool()]))
        if rows == 0 or int(total_tokens) == 0:
            logger.warning("no trainable token in this batch (all dropped or masked)")
            return {"loss": 0.0, "skipped": 1.0, "grad_norm": 0.0, **metrics}
        normalizer = (
            total_tokens if self.loss_aggregation == "token" else (mask.sum(dim=-1) > 0).sum()
        )
        chunks = [
            slice(start, min(start + self.micro_batch_size, rows))
            for start in range(0, rows, self.micro_batch_size)
        ]
        old_logps, ref_logps = self._fixed_logps(tensors, chunks)
        self.model.train()
        all_stats: dict[str, list[torch.Tensor]] = {}
        for iteration in range(self.num_iterations):
            step_loss, grad_norm, stats = self._optimizer_step(
                tensors, chunks, old_logps, ref_logps, normalizer
            )
            for name in ("ratio", "clipped", "ratios", "weights", "gaps"):
                all_stats.setdefault(name, []).extend(stats.get(name, []))
            if iteration == 0:  # the entropy of the policy that sampled the batch
                all_stats["entropy"] = stats.get("entropy", [])
        self.model.eval()
        tokens = float(total_tokens)
        # the last iteration's policy and KL terms, summed over its micro-batches
        step_policy = float(torch.stack([t.sum() for t in stats["policy"]]).sum())
        step_kl = float(torch.stack([t.sum() for t in stats["kl"]]).sum())
        metrics.update(loss=step_loss, policy_loss=step_policy / tokens, grad_norm=grad_norm)
        if self.beta:
            metrics["kl"] = step_kl / tokens
        metrics.update(loss_summary(all_stats))
        return metrics

    def _fixed_logps(
        self, tensors: dict[str, torch.Tensor], chunks: list[slice]
    ) -> tuple[list[torch.Tensor | None], list[torch.Tensor | None]]:
        """Per micro-batch, the logps that stay fixed over the iterations: the old
        policy's (only with several iterations; one iteration uses its own forward
        pass, detached) and the reference model's (only with ``beta``)."""
        import torch

        old_logps: list[torch.Tensor | None] = [None] * len(chunks)
        ref_logps: list[torch.Tensor | None] = [None] * len(chunks)
        with torch.no_grad():
            for index, chunk in enumerate(chunks):
                ids, attention = tensors["input_ids"][chunk], tensors["attention_mask"][chunk]
                if self.num_iterations > 1:
                    old, _ = token_logprobs(self.model, ids, attention, self.temperature)
                    old_logps[index] = old
                if self.beta:
                    ref, _ = token_logprobs(self.ref_model, ids, attention, self.temperature)
                    ref_logps[index] = ref
        return old_logps, ref_logps

    def _optimizer_step(
        self,
        tensors: dict[str, torch.Tensor],
        chunks: list[slice],
        old_logps: list[torch.Tensor | None],
        ref_logps: list[torch.Tensor | None],
        normalizer: torch.Tensor,
    ) -> tuple[float, float, dict[str, list[torch.Tensor]]]:
        """One optimizer step, accumulating the gradient over the micro-batches: the
        loss backpropagated, the clipped gradient norm, and the loss terms."""
        import torch

        self.optimizer.zero_grad(set_to_none=True)
        stats: dict[str, list[torch.Tensor]] = {}
        step_loss = 0.0
        for chunk, old, ref in zip(chunks, old_logps, ref_logps):
            part = {k: v[chunk] for k, v in tensors.items()}
            loss = self.loss(part, old, normalizer=normalizer, ref_logps=ref, stats=stats)
            loss.backward()
            step_loss += float(loss.detach())
        grad_norm = float(
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        )
        self.optimizer.step()
        return step_loss, grad_norm, stats

    def finish(self, result: TrainResult) -> None:
        if self._agent is not None:
            self._agent.close()
        if self.output_dir is None:
            return
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(self.output_dir)
        self.tokenizer.save_pretrained(self.output_dir)
        result.artifacts["model"] = str(self.output_dir)
