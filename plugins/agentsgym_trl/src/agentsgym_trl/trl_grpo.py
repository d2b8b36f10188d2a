"""``trl-grpo``: train with ``trl.GRPOTrainer`` on rollouts the agentsgym runner plays.

TRL's supported path for multi-turn environments is a ``rollout_func``
(``GRPOTrainer(..., rollout_func=f)``, TRL >= 0.26; checked against 1.16):

    rollout_func(prompts: list, trainer: GRPOTrainer) -> {
        "prompt_ids":     list[list[int]],    # one per prompt
        "completion_ids": list[list[int]],
        "logprobs":       list[list[float]] | None,   # sampling logprobs per completion token
        "env_mask":       list[list[int]],    # 1 = model token (trained), 0 = env token
        ...                                   # any other key goes to the reward functions
    }

``prompts`` is this process's slice of the generation batch, each dataset prompt
repeated ``num_generations`` times (TRL's ``RepeatSampler``), and one completion is
returned per entry. TRL treats ``env_mask`` as its tool mask: the loss mask is
``completion_mask * env_mask``, so environment tokens never enter the loss.

How an agentsgym rollout becomes TRL completions:

* the dataset prompt is the JSON of a dataset row ``{env_class_path, env_config,
  task_data}``; each prompt entry is played as one trial by the runner;
* ``prompt_ids`` are the episode's tokens before the agent's first token (the first
  prompt, exactly as the model saw it); ``completion_ids`` is everything after,
  through the agent's last token: its replies (mask 1) and the env turns between
  them (mask 0), token for token as the episode holds them;
* an episode that a chat template which is not prefix-preserving split into several
  views gives one completion per view, each with the episode's advantage: the last
  view is the entry's completion, the earlier ones are extra rows
  (:mod:`agentsgym_trl.trl_trainer`). Every agent token is trained once.
  ``--chat-template training`` (TRL's prefix-preserving training templates) keeps
  such episodes in one view instead;
* ``logprobs`` are the sampled logprobs of the agent tokens (0.0 on env tokens,
  which the mask removes; ``None`` for an agent token whose logprob is unknown);
  ``None`` when no agent returned any. TRL's importance-sampling correction then
  uses them whatever sampled them (see :mod:`agentsgym_trl.trl_trainer`);
* the reward function returns the episode's ``final_reward`` as the sequence reward;
  TRL normalises it within each group of ``num_generations`` rollouts of a task. A
  failed episode becomes a one-token, fully masked completion whose reward is
  ``None``, so TRL gives it advantage 0;
* an episode with a reply cut at the length limit is masked out of the loss and
  counts as a failure (the lowest reward of the run) in its group's baseline, by
  default in multi-turn envs (``mask_truncated_completions``, see
  :mod:`agentsgym_trl.screening`); steps re-tokenized from text are trained
  with a warning by default (``on_retokenized``).

By default the rollouts are played by a
:class:`~agentsgym_trl.transformers_agent.TransformersAgent` sharing the
trainer's model (on-policy, no copy). On a GPU machine, pass an ``openai`` agent
pointing at ``trl vllm-serve`` and set ``use_vllm=True, vllm_mode="server"``: TRL
pushes the new weights to the server before every ``rollout_func`` call (see
docs/training.md).
"""

from __future__ import annotations

import json
import logging
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from agentsgym.errors import TrainerOptionError
from agentsgym.trainers import RolloutSource, StepCallback, StepMetrics, TrainResult
from agentsgym.trajectory import Episode, TrajectoryBatch
from agentsgym_trl.batch_trainer import policy_sampling
from agentsgym_trl.chat_templates import apply_chat_template_choice, check_source_template
from agentsgym_trl.grpo_config import build_grpo_config
from agentsgym_trl.screening import RetokenizedPolicy, RolloutScreen, reward_signal
from agentsgym_trl.trl_trainer import ExtraView, grpo_trainer_class

if TYPE_CHECKING:
    from agentsgym.agents import Agent

logger = logging.getLogger(__name__)

REWARD_FIELD = "agentsgym_final_reward"


@dataclass
class View:
    """One view of an episode as a TRL completion (see the module docstring)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float | None] | None
    """Sampled logprobs: a float on agent tokens whose logprob is known, ``None`` on
    agent tokens whose logprob is unknown, 0.0 on env tokens; ``None`` altogether
    when the episode has none."""


def episode_views(episode: Episode) -> list[View]:
    """Every view of a finished episode that holds agent tokens, in order.

    One view unless a chat template that is not prefix-preserving split the episode.
    Each view's prompt is its tokens before its first agent token; its completion runs
    from there through its last agent token.
    """
    views = []
    for segment in episode.segments:
        agent = np.flatnonzero(segment.agent_mask)
        if not agent.size:
            continue
        first, last = int(agent[0]), int(agent[-1])
        ids = segment.token_ids.tolist()
        mask = segment.agent_mask[first : last + 1].tolist()
        logprobs: list[float | None] | None = None
        if episode.has_logprobs and segment.logprobs is not None:
            values = segment.logprobs[first : last + 1].tolist()
            logprobs = [(None if math.isnan(v) else v) if m else 0.0 for v, m in zip(values, mask)]
        views.append(View(ids[:first], ids[first : last + 1], mask, logprobs))
    return views


def episode_completion(episode: Episode) -> tuple[list[int], list[int], list[int], list[float]]:
    """(prompt_ids, completion_ids, env_mask, logprobs) of an episode's last view
    (logprobs 0.0 where unknown)."""
    view = episode_views(episode)[-1]
    logprobs = view.logprobs or [0.0] * len(view.completion_ids)
    return (
        view.prompt_ids,
        view.completion_ids,
        view.env_mask,
        [0.0 if x is None else x for x in logprobs],
    )


def rollouts_to_trl(
    batch: TrajectoryBatch,
    pad_token_id: int,
    *,
    screen: RolloutScreen | None = None,
    multi_turn: Callable[[Episode], bool] | None = None,
) -> tuple[dict[str, Any], list[ExtraView]]:
    """TRL ``rollout_func`` output for a batch played with one trial per group, and
    the earlier views of split episodes (extra rows, see :mod:`.trl_trainer`).

    Group ``i`` (one prompt entry) gives completion ``i``: its episode's last view.
    ``screen`` applies the re-tokenized and truncation policies (default: warn about
    re-tokenized data; mask episodes with a truncated reply, in multi-turn envs as
    ``multi_turn`` tells, default all).
    """
    screen = screen if screen is not None else RolloutScreen(trainer="trl-grpo")
    multi_turn = multi_turn if multi_turn is not None else (lambda _episode: True)
    prompt_ids: list[list[int]] = []
    completion_ids: list[list[int]] = []
    env_mask: list[list[int]] = []
    logprobs: list[list[float | None]] = []
    rewards: list[float | None] = []
    extra: list[ExtraView] = []
    episodes: list[Episode | None] = []
    for group in batch.groups:
        trial = group.trials[0] if group.trials else []
        usable = bool(trial) and all(e.ok for e in trial) and trial[-1].num_agent_tokens > 0
        episodes.append(trial[-1] if usable else None)
    dropped = screen.dropped(e for e in episodes if e is not None)
    # A cut episode counts as a failure: the lowest reward seen (see screening).
    floor = screen.failure_score(
        e.final_reward for e in episodes if e is not None and id(e) not in dropped
    )
    any_logprobs = False
    for row, episode in enumerate(episodes):
        if episode is None or id(episode) in dropped:
            prompt_ids.append([pad_token_id])
            completion_ids.append([pad_token_id])
            env_mask.append([0])
            logprobs.append([0.0])
            rewards.append(None)
            continue
        views = episode_views(episode)
        reward = episode.final_reward
        if screen.masks(episode, multi_turn):
            views = [
                View(v.prompt_ids, v.completion_ids, [0] * len(v.env_mask), v.logprobs)
                for v in views
            ]
            reward = floor
        *earlier, last = views
        extra += [
            ExtraView(row, v.prompt_ids, v.completion_ids, v.env_mask, v.logprobs) for v in earlier
        ]
        prompt_ids.append(last.prompt_ids)
        completion_ids.append(last.completion_ids)
        env_mask.append(last.env_mask)
        if last.logprobs is not None:
            any_logprobs = True
            logprobs.append(last.logprobs)
        else:
            logprobs.append([None if m else 0.0 for m in last.env_mask])
        rewards.append(reward)
    output = {
        "prompt_ids": prompt_ids,
        "completion_ids": completion_ids,
        "logprobs": logprobs if any_logprobs else None,
        "env_mask": env_mask,
        REWARD_FIELD: rewards,
    }
    return output, extra


TRL_METRICS = {
    # TRL's view of the rewards (a cut episode counted as a failure); ours are the env's
    "trl_reward": "reward",
    "trl_reward_std": "reward_std",
    "frac_reward_zero_std": "frac_reward_zero_std",
    "grad_norm": "grad_norm",
    "entropy": "entropy",
    "kl": "kl",
    "clip_fraction": "clip_ratio/region_mean",
    "clip_fraction_low": "clip_ratio/low_mean",
    "clip_fraction_high": "clip_ratio/high_mean",
    "is_ratio_min": "sampling/importance_sampling_ratio/min",
    "is_ratio_mean": "sampling/importance_sampling_ratio/mean",
    "is_ratio_max": "sampling/importance_sampling_ratio/max",
    "sampling_logp_diff_mean": "sampling/sampling_logp_difference/mean",
    "sampling_logp_diff_max": "sampling/sampling_logp_difference/max",
    "completion_length": "completions/mean_length",
}
"""Step-log names (shared with per-token-grpo) of the TRL log entries kept."""


def rewards_by_prompt(prompts: list[Any], batch: TrajectoryBatch) -> dict[str, list[float]]:
    """The final rewards of each prompt's rollouts: TRL's GRPO groups. (TRL repeats a
    prompt once per generation and each entry is played as a group of one, so the
    batch's own groups are not GRPO's.)"""
    rewards: dict[str, list[float]] = {}
    for prompt, group in zip(prompts, batch.groups):
        key = prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True)
        rewards.setdefault(key, []).extend(e.final_reward for e in group.episodes)
    return rewards


def pad_token_id(tokenizer: Any) -> int:
    """The pad id of batches: the tokenizer's pad token, else its EOS (Llama 3.2 has no
    pad token and pads with ``<|eot_id|>``; masks tell padding apart), else 0."""
    for candidate in (tokenizer.pad_token_id, tokenizer.eos_token_id):
        if candidate is not None:
            return int(candidate)
    return 0


def final_reward(completions: list[Any], **kwargs: Any) -> list[float | None]:
    """The reward function: each rollout's ``final_reward`` (``None`` if it failed)."""
    return list(kwargs[REWARD_FIELD])


class TRLGRPOAdapter:
    """``trl.GRPOTrainer`` with the agentsgym runner as its ``rollout_func``.

    :param model: a model folder or hub name TRL loads, a loaded ``PreTrainedModel``,
        or ``"tiny"`` (a tiny random model on the bundled tokenizer).
    :param tokenizer: default: the model's. Every env is built with it.
    :param output_dir: where TRL writes checkpoints and the final model.
    :param learning_rate: AdamW learning rate.
    :param temperature, top_p, top_k, max_new_tokens: sampling of the default
        (transformers) policy agent. ``temperature`` is also given to TRL, which
        scores tokens at that temperature.
    :param seed: training and sampling seed.
    :param agent_batch_size: prompts the default agent generates together.
    :param chat_template: ``"model"`` (default), ``"training"`` (TRL's
        prefix-preserving training variant) or a ``.jinja`` path; set on the
        tokenizer, which the rollout source must share (see
        :mod:`agentsgym_trl.chat_templates`).
    :param on_retokenized: what to do with steps re-tokenized from text: ``"warn"``
        (default), ``"error"``, ``"drop"`` or ``"allow"``.
    :param mask_truncated_completions: mask episodes holding a reply cut at the
        length limit out of the loss, counting them as failures in their group's
        baseline; ``None`` (default): in multi-turn envs only. Unlike TRL's option of
        the same name, which looks at the completion's last token only, every reply
        of the episode counts.
    :param grpo_config: further ``trl.GRPOConfig`` fields (``beta``, ``loss_type``,
        ``use_vllm``, ``vllm_mode``, ``vllm_importance_sampling_mode``,
        ``gradient_checkpointing``, ...); they win over the values this adapter derives.
    """

    def __init__(
        self,
        model: Any = None,
        *,
        tokenizer: Any = None,
        output_dir: str | Path = "agentsgym-grpo",
        learning_rate: float = 1e-6,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        max_new_tokens: int = 256,
        seed: int = 0,
        agent_batch_size: int = 8,
        chat_template: str | None = None,
        on_retokenized: RetokenizedPolicy = "warn",
        mask_truncated_completions: bool | None = None,
        grpo_config: dict[str, Any] | None = None,
        **grpo_fields: Any,
    ) -> None:
        if model is None:
            raise TrainerOptionError("trl-grpo needs a model (a folder, a loaded model, or 'tiny')")
        try:
            import trl  # noqa: F401
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError("trl-grpo needs TRL: pip install agentsgym-trl") from exc
        from agentsgym import load_tokenizer
        from agentsgym_trl.tiny_model import TINY_MODEL
        from agentsgym_trl.transformers_agent import load_model

        if isinstance(model, str) and model != TINY_MODEL:
            from agentsgym.registry import model_folder

            # TRL loads it (dtype, device map, distributed settings); a registered model
            # name (smollm2) is handed over as its folder.
            model = model_folder(model) or model
            self.model: Any = model
            self.tokenizer = load_tokenizer(tokenizer if tokenizer is not None else model)
        else:
            self.model, self.tokenizer = load_model(model, tokenizer)
        self.output_dir = Path(output_dir)
        self.learning_rate = learning_rate
        self.temperature = temperature
        self.seed = seed
        self.sampling = policy_sampling(
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            max_new_tokens=max_new_tokens,
            seed=seed,
            batch_size=agent_batch_size,
        )
        self.grpo_overrides = {**(grpo_config or {}), **grpo_fields}
        # Ours masks an episode when any of its replies was cut, not only the last one.
        mask = self.grpo_overrides.pop("mask_truncated_completions", mask_truncated_completions)
        self.screen = RolloutScreen(on_retokenized, mask, trainer="trl-grpo")
        self.chat_template = chat_template
        self.tokenizer, self.chat_template_source = apply_chat_template_choice(
            self.tokenizer, chat_template
        )
        self.trainer: Any = None
        self._agent: Any = None
        self._pending: list[StepMetrics] = []
        self.last_batch: TrajectoryBatch | None = None

    # ------------------------------------------------------------------ setup
    def grpo_args(
        self,
        source: RolloutSource,
        max_steps: int,
        *,
        save_steps: int = 0,
        save_total_limit: int | None = 2,
    ) -> Any:
        """The ``GRPOConfig``: one generation round and one optimizer step per step.

        Fields go under the names the installed ``GRPOConfig`` declares (see
        :mod:`agentsgym_trl.grpo_config`)."""
        import torch

        cuda = torch.cuda.is_available()
        group = source.num_rollouts
        fields: dict[str, Any] = {
            "output_dir": str(self.output_dir),
            "max_steps": max_steps,
            "learning_rate": self.learning_rate,
            "num_generations": group,
            "per_device_train_batch_size": source.tasks_per_step * group,
            "gradient_accumulation_steps": 1,
            "temperature": self.temperature,
            "seed": self.seed,
            "use_cpu": not cuda,
            "bf16": cuda and torch.cuda.is_bf16_supported(),
            "activation_checkpointing": cuda,
            "logging_steps": 1,
            # TRL's own checkpoints (model, optimizer, scheduler, RNG, data position).
            "save_strategy": "steps" if save_steps else "no",
            "save_steps": save_steps or 500,
            "save_total_limit": save_total_limit,
            "report_to": "none",
            "disable_tqdm": True,
            "shuffle_dataset": True,
        }
        fields.update(self.grpo_overrides)
        if fields["num_generations"] < 2:
            raise TrainerOptionError(
                "trl-grpo needs at least 2 rollouts per task (--num-rollouts 2)"
            )
        return build_grpo_config(fields, given=set(self.grpo_overrides))

    def prompt_dataset(self, source: RolloutSource) -> Any:
        """TRL's train dataset: one ``prompt`` per task, the JSON of its dataset row."""
        import datasets

        return datasets.Dataset.from_dict(
            {"prompt": [json.dumps(row.model_dump(), sort_keys=True) for row in source.rows]}
        )

    def build(
        self,
        source: RolloutSource,
        max_steps: int,
        agent: Agent | None = None,
        *,
        save_steps: int = 0,
        save_total_limit: int | None = 2,
        run_arguments: dict[str, Any] | None = None,
    ) -> Any:
        """The configured ``GRPOTrainer`` (not yet trained)."""
        GRPOTrainer = grpo_trainer_class()

        check_source_template(source, self.tokenizer, self.chat_template)
        if source.tasks_per_step > len(source.rows):
            raise TrainerOptionError(
                f"tasks_per_step ({source.tasks_per_step}) exceeds the number of tasks "
                f"({len(source.rows)})"
            )
        args = self.grpo_args(
            source, max_steps, save_steps=save_steps, save_total_limit=save_total_limit
        )
        if args.beta != 0.0:
            self._snapshot_reference()
        if agent is not None and not args.use_vllm:
            logger.warning(
                "trl-grpo plays with the given agent, which does not receive the trained "
                "weights unless it serves them through TRL's vLLM server (use_vllm=True, "
                "vllm_mode='server'); the rollouts are off-policy"
            )
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*rollout_func.*experimental.*")
            trainer = GRPOTrainer(
                model=self.model,
                reward_funcs=[final_reward],
                args=args,
                train_dataset=self.prompt_dataset(source),
                processing_class=self.tokenizer,
                rollout_func=self.rollout_func(source, agent),
                callbacks=[_StepCallback(self, source, run_arguments)],
            )
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)  # progress goes through on_step
        self.trainer = trainer
        return trainer

    def _snapshot_reference(self) -> None:
        """TRL loads the KL reference model from ``model.config.name_or_path``.

        A model built in memory (e.g. ``"tiny"``) has none, so its initial weights are
        saved under ``output_dir/reference-model`` and named there.
        """
        if isinstance(self.model, str) or getattr(self.model.config, "name_or_path", ""):
            return
        path = self.output_dir / "reference-model"
        if not (path / "config.json").exists():  # a resumed run keeps the first snapshot
            self.model.save_pretrained(path)
        self.model.config.name_or_path = str(path)

    def rollout_func(
        self, source: RolloutSource, agent: Agent | None = None
    ) -> Callable[[list[Any], Any], dict[str, Any]]:
        """The function TRL calls for completions (see the module docstring)."""

        def rollout(prompts: list[Any], trainer: Any) -> dict[str, Any]:
            started = time.perf_counter()
            rows = [json.loads(p) if isinstance(p, str) else p for p in prompts]
            player = agent if agent is not None else self.policy(trainer)
            batch = source.play(rows, player, num_rollouts=1)
            self.last_batch = batch
            output, views = rollouts_to_trl(
                batch,
                pad_token_id(self.tokenizer),
                screen=self.screen,
                multi_turn=source.is_multi_turn,
            )
            trainer.pending_views = views
            metrics = StepMetrics.of_batch(batch, step=trainer.state.global_step + 1)
            metrics.extra.update(reward_signal(rewards_by_prompt(prompts, batch).values()))
            metrics.extra["extra_views"] = float(len(views))
            metrics.extra["masked_rollouts"] = float(
                sum(
                    1
                    for mask, reward in zip(output["env_mask"], output[REWARD_FIELD])
                    if reward is not None and not any(mask)
                )
            )
            metrics.seconds = time.perf_counter() - started
            metrics.extra["rollout_seconds"] = metrics.seconds
            self._pending.append(metrics)
            return output

        return rollout

    def policy(self, trainer: Any) -> Agent:
        """A transformers agent generating with the trainer's current weights."""
        from agentsgym_trl.transformers_agent import TransformersAgent

        model = trainer.accelerator.unwrap_model(trainer.model)
        if self._agent is None:
            self._agent = TransformersAgent(model, tokenizer=self.tokenizer, **self.sampling)
        self._agent.model = model
        return self._agent

    # ------------------------------------------------------------------ train
    def train(
        self,
        source: RolloutSource,
        *,
        max_steps: int,
        on_step: StepCallback | None = None,
        agent: Agent | None = None,
        save_steps: int = 0,
        save_total_limit: int | None = 2,
        resume_from: str | Path | None = None,
        run_arguments: dict[str, Any] | None = None,
    ) -> TrainResult:
        """Train for ``max_steps`` steps; a checkpoint (TRL's, plus agentsgym's run
        state) every ``save_steps`` steps; ``resume_from`` a checkpoint folder."""
        from agentsgym_trl.checkpoints import read_run_state

        if max_steps < 1:
            raise TrainerOptionError(f"max_steps must be at least 1, got {max_steps}")
        trainer = self.build(
            source,
            max_steps,
            agent,
            save_steps=save_steps,
            save_total_limit=save_total_limit,
            run_arguments=run_arguments,
        )
        result = TrainResult(output_dir=self.output_dir)
        if resume_from is not None:
            result.steps = read_run_state(resume_from).step_metrics()
        self._on_step = on_step
        self._result = result
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings(
                    "ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning
                )
                trainer.train(
                    resume_from_checkpoint=str(resume_from) if resume_from is not None else None
                )
        finally:
            if self._agent is not None:
                self._agent.close()
        trainer.save_model(str(self.output_dir))
        self.tokenizer.save_pretrained(str(self.output_dir))
        result.artifacts["model"] = str(self.output_dir)
        return result

    def _record(self, logs: dict[str, Any], step: int) -> None:
        played = self._pending
        self._pending = []
        metrics = played[-1] if played else StepMetrics(step=step)
        metrics.step = step
        loss = logs.get("loss")
        metrics.loss = float(loss) if loss is not None else None
        for ours, theirs in TRL_METRICS.items():
            value = logs.get(theirs)
            if isinstance(value, (int, float)) and math.isfinite(value):
                metrics.extra[ours] = float(value)
        if self.trainer is not None:
            metrics.extra.update(getattr(self.trainer, "scored_stats", {}))
        result = getattr(self, "_result", None)
        if result is not None:
            result.steps.append(metrics)
        callback = getattr(self, "_on_step", None)
        if callback is not None:
            callback(metrics)


def _callback_base() -> type:
    from transformers import TrainerCallback

    return TrainerCallback


class _StepCallback(_callback_base()):  # type: ignore[misc]
    """Turns TRL's per-step logs into :class:`StepMetrics`, and adds agentsgym's run
    state to each checkpoint TRL saves."""

    def __init__(
        self,
        adapter: TRLGRPOAdapter,
        source: RolloutSource | None = None,
        run_arguments: dict[str, Any] | None = None,
    ) -> None:
        self.adapter = adapter
        self.source = source
        self.run_arguments = run_arguments

    def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        from agentsgym_trl.checkpoints import checkpoint_path, write_run_state

        result = getattr(self.adapter, "_result", None)
        write_run_state(
            checkpoint_path(args.output_dir, state.global_step),
            step=state.global_step,
            steps=result.steps if result is not None else [],
            source=self.source,
            arguments=self.run_arguments,
        )

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any
    ) -> None:
        if logs and "loss" in logs:
            self.adapter._record(logs, state.global_step)
