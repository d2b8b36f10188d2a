"""The ``trl.GRPOTrainer`` subclass behind ``trl-grpo``: every view, sampled logprobs.

Two things TRL's ``rollout_func`` path does not do, added here with as little of
TRL's machinery overridden as possible (checked against TRL 1.13 and 1.16):

* **Every view of a split episode.** TRL takes exactly one completion per prompt
  entry and computes one advantage per entry. An episode that a template which is
  not prefix-preserving split into several views gives its last view as the entry's
  completion; :attr:`AgentsgymGRPOTrainer.pending_views` holds the earlier ones, which
  are appended to the scored batch as extra rows that take their episode's advantage
  (their old, reference and importance-sampling values computed exactly as TRL
  computes them for its own rows).
* **Importance sampling with any sampler's logprobs.** TRL corrects for the gap
  between the sampler and the trained model (``vllm_importance_sampling_correction``,
  on by default) only when *it* generates with vLLM (``use_vllm``). Here it applies
  whenever the rollouts came with sampled logprobs: the transformers agent, vLLM or
  any token-in server behind the openai agent. For those batches ``use_vllm`` reads
  true inside TRL's scoring and loss code (so TRL's own code computes the ratio,
  its modes ``vllm_importance_sampling_mode`` and caps, and logs
  ``sampling/importance_sampling_ratio/*`` and ``sampling/sampling_logp_difference/*``),
  and false everywhere else (no weight sync to a server that does not exist). A
  token whose sampled logprob is unknown (``NaN``) gets ratio 1, as TRL does.

* **Prompts known ahead** (``plan_prompts=True``, for ``--async``): TRL's train
  sampler is wrapped in a :class:`~agentsgym_trl.trl_prompt_plan.PlannedSampler`
  (:attr:`AgentsgymGRPOTrainer.prompt_plan`), so that a rollout stream can play the
  prompts TRL will ask for before it asks (:mod:`agentsgym_trl.trl_stream`).

The scored batch's statistics (:func:`scored_stats`) give the step log the importance
ratios both raw (``is_ratio_*``) and as TRL applied them (``is_weight_*``), on the same
rows the loss trains, the extra views included.

And one thing a run must not do: transformers pickles the trainer's arguments into
``training_args.bin`` beside every saved model and checkpoint, secrets included
(``hub_token``, a ``vllm_server_base_url`` with credentials); the subclass saves a
redacted copy (:func:`redacted_args`) instead.

This module imports torch and TRL (slow): :mod:`agentsgym_trl.trl_grpo` imports it
when it builds a trainer.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any

import torch
import torch.nn.functional as F
from trl import GRPOTrainer
from trl.models.utils import disable_gradient_checkpointing
from trl.trainer.utils import use_adapter

from agentsgym.runtime import redact
from agentsgym_trl.spread import spread
from agentsgym_trl.trl_prompt_plan import PlannedSampler
from agentsgym_trl.trl_rollouts import ExtraView


def redacted_args(args: Any) -> Any:
    """A shallow copy of a ``TrainingArguments`` dataclass with every secret redacted
    (fields with secret-looking names, secrets inside values, URL userinfo); ``args``
    itself is left as it is, since training needs the real values."""
    copied = copy.copy(args)
    for field in dataclasses.fields(args):
        value = getattr(args, field.name, None)
        if not isinstance(value, (str, dict, list, tuple)):
            continue
        clean = redact({field.name: value})[field.name]
        if isinstance(value, tuple) and isinstance(clean, list):
            clean = tuple(clean)
        if clean != value:
            setattr(copied, field.name, clean)
    return copied


def scored_stats(output: dict[str, Any]) -> dict[str, float]:
    """Statistics of the rows of a scored batch that reach the loss: their advantages,
    and with importance sampling the raw ratios ``pi_old / pi_sample`` (``is_ratio_*``)
    and the weights TRL applies, truncated or masked (``is_weight_*``)."""
    mask = output["completion_mask"]
    if output.get("tool_mask") is not None:
        mask = mask * output["tool_mask"]
    trained = mask.sum(dim=1) > 0
    advantages = output["advantages"][trained]
    stats = {"trained_rows": float(trained.sum()), "rows": float(trained.numel())}
    if advantages.numel():
        stats.update(spread("advantage", advantages))
    applied = output.get("importance_sampling_ratio")
    if applied is None:
        return stats
    # Over the tokens whose sampled logprob is known, as per-token-grpo reports them
    # (TRL gives an unknown one, NaN, no gap: weight 1). Per token (B, T), or per row
    # (B, 1) at sequence level.
    sampled = output["sampling_per_token_logps"]
    known = mask.bool() & ~torch.isnan(sampled)
    gaps = torch.where(known, output["old_per_token_logps"] - sampled, 0.0)
    if applied.shape == mask.shape:
        raw, weights = torch.exp(gaps)[known], applied[known]
    else:
        rows = known.any(dim=-1)
        raw, weights = torch.exp(gaps.sum(dim=-1))[rows], applied[rows].flatten()
    if weights.numel():
        stats.update(spread("is_ratio", raw))
        stats.update(spread("is_weight", weights))
    return stats


def filled_to_chunks(views: list[ExtraView], rows: int, chunks: int) -> list[ExtraView]:
    """``views`` and fully masked copies of the last one, so that the ``rows`` scored
    rows plus the views divide into ``chunks`` (TRL splits the generation batch
    evenly into ``steps_per_generation`` chunks and would drop a remainder)."""
    fill = (-(rows + len(views))) % chunks
    last = views[-1]
    masked = ExtraView(
        last.row, last.prompt_ids, last.completion_ids, [0] * len(last.env_mask), None
    )
    return views + [masked] * fill


def pad_left(tensor: torch.Tensor, width: int, value: float) -> torch.Tensor:
    return F.pad(tensor, (width - tensor.shape[1], 0), value=value)


def pad_right(tensor: torch.Tensor, width: int, value: float) -> torch.Tensor:
    return F.pad(tensor, (0, width - tensor.shape[1]), value=value)


def padded_rows(
    values: list[list[Any]], width: int, value: Any, *, at_left: bool, device: Any
) -> torch.Tensor:
    """A ``(len(values), width)`` tensor of the rows, padded with ``value``."""
    padded = [
        [value] * (width - len(v)) + list(v) if at_left else list(v) + [value] * (width - len(v))
        for v in values
    ]
    return torch.tensor(padded, device=device)


WIDENED_COMPLETION_FIELDS = [
    ("completion_ids", None),  # None: the pad id
    ("completion_mask", 0),
    ("tool_mask", 1),
    ("old_per_token_logps", 0.0),
    ("ref_per_token_logps", 0.0),
    ("sampling_per_token_logps", 0.0),
]
"""The per-completion-token fields of a scored batch, and the value that pads them."""


class AgentsgymGRPOTrainer(GRPOTrainer):  # type: ignore[misc]
    """See the module docstring."""

    def __init__(self, *args: Any, plan_prompts: bool = False, **kwargs: Any) -> None:
        self._sampled_is = False
        self._use_vllm = False
        self.pending_views: list[ExtraView] = []
        self.scored_stats: dict[str, float] = {}
        self.plan_prompts = plan_prompts
        self.prompt_plan: PlannedSampler | None = None
        super().__init__(*args, **kwargs)

    # TRL assigns self.use_vllm = args.use_vllm in __init__; the setter keeps it.
    @property  # type: ignore[override]
    def use_vllm(self) -> bool:
        return self._use_vllm or self._sampled_is

    @use_vllm.setter
    def use_vllm(self, value: bool) -> None:
        self._use_vllm = bool(value)

    # ------------------------------------------------------------------ TRL's overrides
    def _generate(self, prompts: list[Any]) -> Any:
        self._sampled_is = False  # no vLLM weight sync for rollouts played elsewhere
        result = super()._generate(prompts)
        logprobs = result[4]
        self._sampled_is = (
            not self._use_vllm
            and self.vllm_importance_sampling_correction
            and logprobs is not None
            and self.model.training
        )
        return result

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> Any:
        self.pending_views = []
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            views, self.pending_views = self.pending_views, []
        if views and self.model.training:
            output = self._append_views(output, views)
        self.scored_stats = scored_stats(output)
        return output

    def _get_train_sampler(self, dataset: Any = None) -> Any:
        sampler = super()._get_train_sampler(dataset)
        if self.plan_prompts:  # --async: the stream plays the prompts TRL will ask for
            prompts = (dataset if dataset is not None else self.train_dataset)["prompt"]
            step_size = self.args.per_device_train_batch_size
            sampler = self.prompt_plan = PlannedSampler(sampler, prompts, step_size)
        return sampler

    def _save(self, output_dir: str | None = None, state_dict: Any = None) -> None:
        # transformers' _save (final model and every checkpoint) pickles self.args
        # into training_args.bin: let it pickle a redacted copy.
        args = self.args
        self.args = redacted_args(args)
        try:
            super()._save(output_dir, state_dict=state_dict)
        finally:
            self.args = args

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
        if not self._use_vllm:
            self._sampled_is = "importance_sampling_ratio" in inputs
        return super()._compute_loss(model, inputs)

    # ------------------------------------------------------------------ extra views
    def _append_views(self, output: dict[str, Any], views: list[ExtraView]) -> dict[str, Any]:
        """``output`` with the views as extra rows, every field computed as TRL would."""
        views = filled_to_chunks(
            views, output["prompt_ids"].shape[0], self.args.steps_per_generation
        )
        width_p = self._width(
            max(output["prompt_ids"].shape[1], max(len(v.prompt_ids) for v in views))
        )
        width_c = self._width(
            max(output["completion_ids"].shape[1], max(len(v.completion_ids) for v in views))
        )
        out = self._widened(output, width_p, width_c)
        extra = self._view_rows(views, output, width_p, width_c)
        extra.update(self._view_logps(out, extra, width_c))
        if "sampling_per_token_logps" in out:
            extra["sampling_per_token_logps"] = self._view_sampling_logps(views, width_c, out)
        if "importance_sampling_ratio" in out:
            extra["importance_sampling_ratio"] = self._importance_ratio(
                extra["old_per_token_logps"],
                extra["sampling_per_token_logps"],
                extra["completion_mask"] * extra["tool_mask"],
            )
        for key, value in extra.items():
            out[key] = torch.cat([out[key], value.to(out[key].dtype)], dim=0)
        added = (extra["completion_mask"] * extra["tool_mask"]).sum()
        out["num_items_in_batch"] = out["num_items_in_batch"] + self.accelerator.gather(
            added
        ).sum().to(out["num_items_in_batch"].dtype)
        return out

    def _width(self, width: int) -> int:
        multiple = self.pad_to_multiple_of
        return width if not multiple else int(math.ceil(width / multiple) * multiple)

    def _widened(self, output: dict[str, Any], width_p: int, width_c: int) -> dict[str, Any]:
        """A copy of ``output`` whose prompt and completion fields are padded to the
        widths of the views."""
        pad_id = self._tokenizer.pad_token_id
        out = dict(output)
        out["prompt_ids"] = pad_left(out["prompt_ids"], width_p, pad_id)
        out["prompt_mask"] = pad_left(out["prompt_mask"], width_p, 0)
        widened = list(WIDENED_COMPLETION_FIELDS)
        if not self._sequence_level_is():  # sequence-level ratios are (B, 1)
            widened.append(("importance_sampling_ratio", 1.0))
        for key, value in widened:
            if out.get(key) is not None:
                out[key] = pad_right(out[key], width_c, pad_id if value is None else value)
        return out

    def _view_rows(
        self, views: list[ExtraView], output: dict[str, Any], width_p: int, width_c: int
    ) -> dict[str, torch.Tensor]:
        """The token fields of the views' rows, and their episodes' advantages."""
        device = output["prompt_ids"].device
        pad_id = self._tokenizer.pad_token_id

        def rows(values: list[list[Any]], width: int, value: Any, at_left: bool) -> torch.Tensor:
            return padded_rows(values, width, value, at_left=at_left, device=device)

        rows_of_views = torch.tensor([v.row for v in views], device=device)
        return {
            "prompt_ids": rows([v.prompt_ids for v in views], width_p, pad_id, True),
            "prompt_mask": rows([[1] * len(v.prompt_ids) for v in views], width_p, 0, True),
            "completion_ids": rows([v.completion_ids for v in views], width_c, pad_id, False),
            "completion_mask": rows(
                [[1] * len(v.completion_ids) for v in views], width_c, 0, False
            ),
            "tool_mask": rows([v.env_mask for v in views], width_c, 1, False),
            "advantages": output["advantages"][rows_of_views],
        }

    def _view_logps(
        self, out: dict[str, Any], extra: dict[str, torch.Tensor], width_c: int
    ) -> dict[str, torch.Tensor]:
        """The old and reference per-token logps of the views' rows, where TRL's rows
        have them."""
        ids = torch.cat([extra["prompt_ids"], extra["completion_ids"]], dim=1)
        attention = torch.cat([extra["prompt_mask"], extra["completion_mask"]], dim=1)
        logps: dict[str, torch.Tensor] = {}
        with (
            torch.no_grad(),
            disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs),
        ):
            if "old_per_token_logps" in out:
                logps["old_per_token_logps"] = self._logps(self.model, ids, attention, width_c)
            if "ref_per_token_logps" in out:
                logps["ref_per_token_logps"] = self._reference_logps(ids, attention, width_c)
        return logps

    def _logps(self, model: Any, ids: Any, attention: Any, width_c: int) -> torch.Tensor:
        batch_size = self.args.per_device_train_batch_size
        return self._get_per_token_logps_and_entropies(
            model, ids, attention, width_c, batch_size=batch_size
        )[0]

    def _reference_logps(self, ids: Any, attention: Any, width_c: int) -> torch.Tensor:
        """As TRL scores its reference: the reference model, or the PEFT model with
        its adapter set to the reference one (or disabled)."""
        if self.ref_model is not None:
            return self._logps(self.ref_model, ids, attention, width_c)
        model = self.accelerator.unwrap_model(self.model)
        name = "ref" if "ref" in model.peft_config else None
        with use_adapter(model, adapter_name=name):
            return self._logps(self.model, ids, attention, width_c)

    def _view_sampling_logps(
        self, views: list[ExtraView], width_c: int, out: dict[str, Any]
    ) -> torch.Tensor:
        """The views' sampled logprobs (``NaN`` where unknown: ratio 1)."""
        values = [
            [
                math.nan if x is None else float(x)
                for x in (v.logprobs or [None] * len(v.completion_ids))
            ]
            for v in views
        ]
        device = out["prompt_ids"].device
        return padded_rows(values, width_c, 0.0, at_left=False, device=device).float()

    def _sequence_level_is(self) -> bool:
        return self.vllm_importance_sampling_mode in ("sequence_mask", "sequence_truncate")

    def _importance_ratio(self, old: Any, sampled: Any, mask: Any) -> Any:
        """TRL's importance-sampling ratio (see its _generate_and_score_completions)."""
        diff = torch.nan_to_num((old - sampled) * mask, nan=0.0)
        mode = self.vllm_importance_sampling_mode
        if self._sequence_level_is():
            diff = diff.sum(dim=-1, keepdim=True)
        ratio = torch.exp(diff)
        low, high = (
            self.vllm_importance_sampling_clip_min,
            self.vllm_importance_sampling_clip_max,
        )
        if mode.endswith("_truncate"):
            return torch.clamp(ratio, min=low, max=high)
        outside = (ratio < (low if low is not None else -math.inf)) | (
            ratio > (high if high is not None else math.inf)
        )
        return ratio.masked_fill(outside, 0.0)
