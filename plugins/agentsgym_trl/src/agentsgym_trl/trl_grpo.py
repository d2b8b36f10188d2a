"""``trl-grpo``: train with ``trl.GRPOTrainer`` on rollouts the agentsgym runner plays.

TRL drives the loop and pulls completions through a ``rollout_func``: each call plays
the prompt entries (dataset rows) as trials with the runner and hands TRL their token
streams, the env tokens masked out of the loss (:mod:`agentsgym_trl.trl_rollouts`
says how). A subclass of ``GRPOTrainer`` trains every view of split episodes and
applies importance sampling to any sampler's logprobs
(:mod:`agentsgym_trl.trl_trainer`); the ``GRPOConfig`` is built from the fields the
installed TRL has (:mod:`agentsgym_trl.grpo_config`); TRL's logs become the step log
(:mod:`agentsgym_trl.trl_step_log`). With ``max_staleness`` (``--async``) the
``rollout_func`` takes each step's batch from a rollout stream that plays TRL's
prompts ahead of the trainer (:mod:`agentsgym_trl.trl_stream`). With ``tracking``
(``--report-to``) TRL reports to the tracker (its ``report_to``), and agentsgym's step
log joins each of TRL's entries (:mod:`agentsgym_trl.train_tracking`).

By default the rollouts are played by a
:class:`~agentsgym_trl.transformers_agent.TransformersAgent` sharing the
trainer's model (on-policy, no copy). With an inference engine generating
(``engine``, ``agentsgym train --vllm-python`` or ``--vllm-server-base-url``), its
agent plays and the trained weights are pushed into it after every optimizer step
(:class:`EngineSyncCallback`, before the rollout stream may play further), each push
timed as ``weight_sync_seconds``; tokens older than the staleness bound are masked
(:mod:`agentsgym_trl.staleness`). If the engine fails, the step's weights are saved
as a checkpoint for ``--resume``. TRL's own vLLM integration (``use_vllm=True,
vllm_mode="server"`` against ``trl vllm-serve``) stays available through
``grpo_config`` (see docs/training.md).
"""

from __future__ import annotations

import json
import logging
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

from agentsgym import TrajectoryBatch
from agentsgym.errors import TrainerOptionError
from agentsgym.runtime import RolloutSource, StepCallback, StepMetrics, TrainResult
from agentsgym_trl.batch_trainer import GeneratingEngine, policy_sampling
from agentsgym_trl.chat_templates import apply_chat_template_choice, check_source_template
from agentsgym_trl.grpo_config import build_grpo_config
from agentsgym_trl.screening import RetokenizedPolicy, RolloutScreen, reward_signal
from agentsgym_trl.staleness import StalenessBound, stale_agent_tokens
from agentsgym_trl.trl_rollouts import (
    REWARD_FIELD,
    final_reward,
    pad_token_id,
    rewards_by_prompt,
    rollouts_to_trl,
)
from agentsgym_trl.trl_step_log import StepLog, StepLogCallback, report_after_step_log
from agentsgym_trl.trl_stream import check_one_group_per_prompt, check_one_trained_role, step_rows
from agentsgym_trl.vllm_client import InferenceServerError

if TYPE_CHECKING:
    from agentsgym import Agent
    from agentsgym_trl.train_eval import HeldOutEval
    from agentsgym_trl.train_tracking import TrainTracking
    from agentsgym_trl.trl_stream import StreamedRollouts

logger = logging.getLogger(__name__)


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
            raise ImportError(
                "trl-grpo needs TRL: pip install trl (agentsgym-trl requires it)"
            ) from exc
        from agentsgym import load_tokenizer
        from agentsgym_trl.tiny_model import TINY_MODEL
        from agentsgym_trl.transformers_agent import load_model

        if isinstance(model, str) and model != TINY_MODEL:
            from agentsgym.runtime import model_folder

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
        self.step_log = StepLog()
        self.last_batch: TrajectoryBatch | None = None
        """The rollouts of the last step (with ``--async``: the groups admitted)."""
        self.streamed: StreamedRollouts | None = None
        self.engine: GeneratingEngine | None = None
        self.token_bound: int | None = None
        """How old a trained token may be (``None``: no bound; see :mod:`.staleness`)."""
        self.synced: dict[str, float] = {}
        """The last weight push's figures, for the step log (``weight_sync_seconds``)."""

    # ------------------------------------------------------------------ setup
    def grpo_args(
        self,
        source: RolloutSource,
        max_steps: int,
        *,
        save_steps: int = 0,
        save_total_limit: int | None = 2,
        max_staleness: int | None = None,
        tracking: TrainTracking | None = None,
    ) -> Any:
        """The ``GRPOConfig``: one generation round and one optimizer step per step.

        Fields go under the names the installed ``GRPOConfig`` declares (see
        :mod:`agentsgym_trl.grpo_config`). With ``max_staleness`` of 1 or more, TRL's
        importance sampling defaults to per-token truncation (``token_truncate``):
        stale tokens are weighted by ``min(pi_old / pi_sample, cap)``, not dropped.
        With ``tracking``, TRL reports to its tracker, in its project and run."""
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
        if max_staleness:
            fields["vllm_importance_sampling_mode"] = "token_truncate"
        if tracking is not None:
            fields.update(
                report_to=[tracking.report_to],
                project=tracking.project,
                run_name=tracking.run_name,
            )
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
        max_staleness: int | None = None,
        tracking: TrainTracking | None = None,
        engine: GeneratingEngine | None = None,
    ) -> Any:
        """The configured ``GRPOTrainer`` (not yet trained); with ``max_staleness``, its
        ``rollout_func`` takes from a rollout stream (:mod:`agentsgym_trl.trl_stream`);
        with ``tracking``, TRL reports each step to it, agentsgym's step log joined; with
        ``engine``, the trained weights are pushed into it after every step."""
        from agentsgym_trl.trl_trainer import AgentsgymGRPOTrainer  # imports TRL: slow

        check_source_template(source, self.tokenizer, self.chat_template)
        if source.tasks_per_step > len(source.rows):
            raise TrainerOptionError(
                f"tasks_per_step ({source.tasks_per_step}) exceeds the number of tasks "
                f"({len(source.rows)})"
            )
        check_one_trained_role(source)
        args = self.grpo_args(
            source,
            max_steps,
            save_steps=save_steps,
            save_total_limit=save_total_limit,
            max_staleness=max_staleness,
            tracking=tracking,
        )
        if args.beta != 0.0:
            self._snapshot_reference()
        if engine is not None and args.use_vllm:
            raise TrainerOptionError(
                "use_vllm=True makes TRL push the weights to its own vLLM server, and "
                "--vllm-python / --vllm-server-base-url make agentsgym push them to its: "
                "choose one"
            )
        self.engine = engine
        self.synced = {}
        if max_staleness is not None or engine is not None:
            self.token_bound = max_staleness if max_staleness is not None else 0
        if agent is not None and not args.use_vllm and engine is None:
            logger.warning(
                "trl-grpo plays with the given agent, which does not receive the trained "
                "weights unless it serves them through TRL's vLLM server (use_vllm=True, "
                "vllm_mode='server'); the rollouts are off-policy"
            )
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*rollout_func.*experimental.*")
            trainer = AgentsgymGRPOTrainer(
                model=self.model,
                reward_funcs=[final_reward],
                args=args,
                train_dataset=self.prompt_dataset(source),
                processing_class=self.tokenizer,
                rollout_func=self.rollout_func(source, agent),
                callbacks=[
                    # before the stream's callback: no step plays ahead of its weights
                    *([EngineSyncCallback(self)] if engine is not None else []),
                    StepLogCallback(self.step_log, self._scored, source, run_arguments, tracking),
                ],
                plan_prompts=max_staleness is not None,
            )
        self.streamed = None
        if max_staleness is not None:
            self.streamed = self._streamed_rollouts(trainer, source, max_staleness, agent)
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)  # progress goes through on_step
        if tracking is not None:
            report_after_step_log(trainer)
        self.trainer = trainer
        return trainer

    def _streamed_rollouts(
        self, trainer: Any, source: RolloutSource, max_staleness: int, agent: Agent | None
    ) -> StreamedRollouts:
        from agentsgym_trl.trl_stream import StreamCallback, StreamedRollouts, check_streamable

        check_streamable(trainer)
        streamed = StreamedRollouts(
            source,
            max_staleness=max_staleness,
            max_steps=int(trainer.args.max_steps),
            policy=self.policy,
            agent=agent,
        )
        trainer.add_callback(StreamCallback(streamed))
        return streamed

    def _scored(self) -> dict[str, float]:
        """The trainer's statistics of the rows that reached the last loss, and the
        weight push that followed its update."""
        return {**getattr(self.trainer, "scored_stats", {}), **self.synced}

    def push_weights(self, trainer: Any) -> None:
        """Push the trainer's weights into the engine as version ``global_step``."""
        assert self.engine is not None
        model = trainer.accelerator.unwrap_model(trainer.model)
        seconds = self.engine.push_weights(model, int(trainer.state.global_step))
        self.synced = {"weight_sync_seconds": seconds}

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
            streamed: dict[str, float] = {}
            if self.engine is not None:
                self.engine.check()
                if not self.synced:  # the first round: the weights TRL starts from
                    self.push_weights(trainer)
            if self.streamed is not None:  # --async: the step's batch was played ahead
                played, batch, streamed = self.streamed.take(prompts, trainer)
            else:
                rows = step_rows(prompts, int(trainer.state.global_step) + 1)
                player = agent if agent is not None else self.policy(trainer)
                played = batch = source.play(rows, player, num_rollouts=1)
                check_one_group_per_prompt(batch, len(rows))
            self.last_batch = batch
            bound = None
            if self.token_bound is not None:
                bound = StalenessBound(int(trainer.state.global_step), self.token_bound)
            output, views = rollouts_to_trl(
                played,
                pad_token_id(self.tokenizer),
                screen=self.screen,
                multi_turn=source.is_multi_turn,
                bound=bound,
            )
            trainer.pending_views = views
            metrics = StepMetrics.of_batch(batch, step=trainer.state.global_step + 1)
            metrics.extra.update(streamed)
            metrics.extra.update(reward_signal(rewards_by_prompt(prompts, played).values()))
            metrics.extra["extra_views"] = float(len(views))
            if bound is not None:
                metrics.extra["stale_tokens_masked"] = float(
                    stale_agent_tokens((e for g in played.groups for e in g.episodes), bound)
                )
            metrics.extra["masked_rollouts"] = float(
                sum(
                    1
                    for mask, reward in zip(output["env_mask"], output[REWARD_FIELD])
                    if reward is not None and not any(mask)
                )
            )
            metrics.seconds = time.perf_counter() - started
            metrics.extra["rollout_seconds"] = metrics.seconds
            self.step_log.played(metrics)
            return output

        return rollout

    def policy(self, trainer: Any) -> Agent:
        """A transformers agent generating with the trainer's current weights."""
        from agentsgym_trl.transformers_agent import TransformersAgent

        model = trainer.accelerator.unwrap_model(trainer.model)
        if self._agent is None:
            self._agent = TransformersAgent(model, tokenizer=self.tokenizer, **self.sampling)
        self._agent.model = model
        # TRL calls for rollouts between its updates: the weights are global_step's
        self._agent.policy_version = int(trainer.state.global_step)
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
        max_staleness: int | None = None,
        tracking: TrainTracking | None = None,
        engine: GeneratingEngine | None = None,
        evaluation: HeldOutEval | None = None,
    ) -> TrainResult:
        """Train for ``max_steps`` steps; a checkpoint (TRL's, plus agentsgym's run
        state) every ``save_steps`` steps; ``resume_from`` a checkpoint folder.
        ``max_staleness`` (``None``: synchronous) plays rollouts ahead of the trainer,
        at most that many versions (:mod:`agentsgym_trl.trl_stream`). ``tracking``: a
        started tracker run that TRL reports to (:mod:`agentsgym_trl.train_tracking`).
        ``engine``: an inference engine whose ``agent`` plays and that takes every
        update's weights. ``evaluation``: held-out tasks played, by who plays the
        rollouts, after the steps it says; their scores join those steps' entries before
        TRL reports them (:mod:`agentsgym_trl.train_eval`)."""
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
            max_staleness=max_staleness,
            tracking=tracking,
            engine=engine,
        )
        result = TrainResult(output_dir=self.output_dir)
        if resume_from is not None:
            result.steps = read_run_state(resume_from).step_metrics()
        self.step_log.steps = result.steps
        self.step_log.on_step = on_step
        self.step_log.evaluate = None
        if evaluation is not None:
            self.step_log.evaluate = lambda metrics: evaluation.after_step(
                metrics, agent if agent is not None else self.policy(trainer)
            )
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings(
                    "ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning
                )
                trainer.train(
                    resume_from_checkpoint=str(resume_from) if resume_from is not None else None
                )
        except InferenceServerError as exc:
            raise self._saved_after(exc, trainer) from exc
        finally:
            if self.streamed is not None:
                self.streamed.close()
            if self._agent is not None:
                self._agent.close()
        trainer.save_model(str(self.output_dir))
        self.tokenizer.save_pretrained(str(self.output_dir))
        result.artifacts["model"] = str(self.output_dir)
        return result

    def _saved_after(self, failure: InferenceServerError, trainer: Any) -> InferenceServerError:
        """The engine failed: save the weights of the last optimizer step as TRL's
        checkpoint (with agentsgym's run state), unless it is saved; the error, saying
        where."""
        step = int(trainer.state.global_step)
        if step == 0:
            return InferenceServerError(f"{failure}\nThe run stopped before any update.")
        from agentsgym_trl.checkpoints import RUN_STATE_FILE, checkpoint_path

        folder = checkpoint_path(self.output_dir, step)
        if not (folder / RUN_STATE_FILE).exists():
            trainer._save_checkpoint(trainer.model, trial=None)  # its on_save adds the run state
        return InferenceServerError(
            f"{failure}\nThe run stopped; what was trained through step {step} is saved in "
            f"{folder}. Fix the inference server and run the same command with --resume."
        )


class EngineSyncCallback(TrainerCallback):  # type: ignore[misc]
    """Pushes the trained weights into the inference engine after every optimizer step
    (the first push, of the weights TRL starts from, is the rollout function's: TRL
    restores a resumed run's step only after ``on_train_begin``)."""

    def __init__(self, adapter: TRLGRPOAdapter) -> None:
        self.adapter = adapter

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.adapter.push_weights(self.adapter.trainer)
