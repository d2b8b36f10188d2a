"""The TrainerAdapter interface: the consuming end of the rollout pipeline.

A trainer adapter is anything with

    train(source: RolloutSource, *, max_steps: int, on_step=None, agent=None) -> TrainResult

An adapter that can checkpoint also takes ``save_steps``, ``save_total_limit``,
``resume_from`` (a checkpoint folder) and ``run_arguments`` (recorded in each
checkpoint, compared on resume; see :mod:`agentsgym_trl.checkpoints`);
``agentsgym train`` passes them only to adapters whose ``train`` accepts them.

A :class:`RolloutSource` holds the tasks (dataset rows) and plays them: each call of
:meth:`RolloutSource.play` runs the agentsgym runner and returns a padded
:class:`~agentsgym.trajectory.TrajectoryBatch` (one group per task). The adapter
decides who plays (its own model, or the ``agent`` it is given), what it does with a
batch (a gradient step, a write to disk) and how often.

Most adapters consume one batch per step; they subclass :class:`BatchTrainer` and
implement :meth:`BatchTrainer.consume` (plus :meth:`BatchTrainer.policy` when they
own a model, and :meth:`BatchTrainer.save_state` / :meth:`BatchTrainer.load_state`
when they hold state a checkpoint must keep). Adapters whose training library drives
its own loop (``trl-grpo``: TRL's ``GRPOTrainer`` pulls rollouts through its
``rollout_func``) implement ``train`` directly and call ``source.play`` from inside
that loop.

An adapter that owns its model can train with an inference engine generating
(``engine``: vLLM, :mod:`agentsgym_trl.train_vllm`): the engine's agent plays, and after
each optimizer update the trainer pushes its weights into the engine
(:meth:`GeneratingEngine.push_weights`, timed as ``weight_sync_seconds``) before the
rollout stream may play further. Tokens older than the staleness bound (``max_staleness``;
0 with an engine generating synchronously) are masked out of the loss
(:mod:`agentsgym_trl.staleness`). When the engine fails or is gone, the run stops with
what was trained saved as a checkpoint, for ``--resume``.

Adapters are registered through the ``register_trainers`` hook and built by name
with :func:`agentsgym.runtime.make_trainer`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentsgym import TrajectoryBatch
from agentsgym.errors import TrainerOptionError
from agentsgym.runtime import RolloutSource, StepCallback, StepMetrics, TrainResult
from agentsgym_trl.checkpoints import (
    RUN_STATE_FILE,
    checkpoint_path,
    prune_checkpoints,
    read_run_state,
    write_run_state,
)
from agentsgym_trl.rollout_stream import RolloutStream
from agentsgym_trl.screening import reward_signal
from agentsgym_trl.staleness import StalenessBound
from agentsgym_trl.vllm_client import InferenceServerError

if TYPE_CHECKING:
    from agentsgym import Agent
    from agentsgym_trl.train_eval import HeldOutEval

logger = logging.getLogger(__name__)


class GeneratingEngine(Protocol):
    """An inference engine generating a run's rollouts with the weights it is pushed."""

    def push_weights(self, model: Any, version: int) -> float:
        """Put ``model``'s weights in place as ``version``; the seconds it took."""

    def check(self) -> None:
        """Raise :class:`~agentsgym_trl.vllm_client.InferenceServerError` if the engine
        is gone (a step would play nothing)."""


class BatchTrainer(ABC):
    """An adapter that consumes one padded :class:`TrajectoryBatch` per step."""

    output_dir: Path | None = None
    source: RolloutSource | None = None
    """The source of the running ``train`` call (for ``consume`` to ask it about envs)."""
    staleness: StalenessBound | None = None
    """While ``consume`` runs: the version the batch is trained at and how old a token
    may be (``None``: no bound); older tokens are left out of the loss."""
    _engine: GeneratingEngine | None = None
    _token_bound: int | None = None
    _trained: tuple[int, dict[str, Any] | None] | None = None
    _evaluation: tuple[HeldOutEval, Agent] | None = None

    def policy(self) -> Agent | None:
        """The agent playing this trainer's own model, or ``None`` if it has none."""
        return None

    def trained_model(self) -> Any:
        """The model this trainer updates (its weights go to an inference engine), or
        ``None`` if it has none."""
        return None

    @abstractmethod
    def consume(self, batch: TrajectoryBatch) -> dict[str, float]:
        """Consume one batch (a gradient step, a write); return metrics (``loss``...)."""

    def finish(self, result: TrainResult) -> None:
        """Called once after the last step (save the model, close files)."""

    def save_state(self, folder: Path) -> None:
        """Write what this trainer needs to continue into a checkpoint folder (the
        model, the optimizer...). Default: nothing (a stateless adapter)."""

    def load_state(self, folder: Path) -> None:
        """Restore what :meth:`save_state` wrote."""

    @contextlib.contextmanager
    def weight_update(self, version: int) -> Iterator[None]:
        """Around each ``consume``: a trainer whose policy generates with the weights it
        trains holds generation off here and sets the policy's version to ``version``
        (the number of updates made). Default: nothing (no own policy)."""
        yield

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
        engine: GeneratingEngine | None = None,
        evaluation: HeldOutEval | None = None,
    ) -> TrainResult:
        """Run steps ``1..max_steps`` (from the step after ``resume_from``'s).

        Every ``save_steps`` steps a checkpoint is written to
        ``output_dir/checkpoint-N`` (see :mod:`agentsgym_trl.checkpoints`),
        keeping the newest ``save_total_limit``. ``max_staleness`` (``None``:
        synchronous) plays rollouts ahead of the trainer through a
        :class:`~agentsgym_trl.rollout_stream.RolloutStream` with that bound; a step
        whose groups the stream discarded, all of them, is not consumed (its step log
        says ``skipped``, and has no loss). ``engine``: an inference engine that
        generates (``agent`` plays with it) and takes the weights after every update
        (module docstring). ``evaluation``: held-out tasks the player plays after the
        steps it says, their scores added to those steps' entries
        (:mod:`agentsgym_trl.train_eval`).
        """
        if max_steps < 1:
            raise TrainerOptionError(f"max_steps must be at least 1, got {max_steps}")
        if engine is not None and self.trained_model() is None:
            raise TrainerOptionError(
                f"{type(self).__name__} trains no model of its own to push into an "
                "inference engine; drop the engine (--vllm-*) or use per-token-grpo"
            )
        player = agent if agent is not None else self.policy()
        if player is None:
            raise TrainerOptionError(
                f"{type(self).__name__} owns no model, so it needs an agent to play the "
                "rollouts (agent=..., CLI: --agent NAME)"
            )
        if save_steps and self.output_dir is None:
            logger.warning("%s has no output_dir: no checkpoints are written", type(self).__name__)
            save_steps = 0
        result = TrainResult(output_dir=self.output_dir)
        self.source = source
        first = 1
        if resume_from is not None:
            state = read_run_state(resume_from)
            self.load_state(Path(resume_from))
            source.load_state_dict(state.source)
            result.steps = state.step_metrics()
            first = state.step + 1
            logger.info("resuming from %s: steps %d..%d", resume_from, first, max_steps)
        with self.weight_update(first - 1):
            pass  # the policy's version: the updates made before this run's first step
        self._engine = engine
        self._evaluation = None if evaluation is None else (evaluation, player)
        bound = max_staleness if max_staleness is not None else 0
        self._token_bound = bound if engine is not None or max_staleness is not None else None
        self._trained = None
        try:
            if engine is not None:
                seconds = engine.push_weights(self.trained_model(), first - 1)
                logger.info("the engine serves version %d (%.2fs)", first - 1, seconds)
            self._run_steps(
                source,
                player,
                first,
                max_steps,
                max_staleness,
                result,
                on_step,
                save_steps,
                save_total_limit,
                run_arguments,
            )
        except InferenceServerError as exc:
            raise self._saved_after(exc, result, run_arguments, save_total_limit) from exc
        self.finish(result)
        return result

    def _run_steps(
        self,
        source: RolloutSource,
        player: Agent,
        first: int,
        max_steps: int,
        max_staleness: int | None,
        result: TrainResult,
        on_step: StepCallback | None,
        save_steps: int,
        save_total_limit: int | None,
        run_arguments: dict[str, Any] | None,
    ) -> None:
        """Steps ``first..max_steps``, synchronous or from a rollout stream."""
        stream = None
        if max_staleness is not None:
            stream = RolloutStream(
                source, player, max_staleness=max_staleness, first_step=first, last_step=max_steps
            )
        with stream if stream is not None else contextlib.nullcontext():
            for step in range(first, max_steps + 1):
                started = time.perf_counter()
                self._check_engine()
                if stream is None:
                    rows = source.next_rows()
                    state, extra = source.state_dict(), None
                    batch = source.play(rows, player)
                else:
                    streamed = stream.take(step)
                    batch, state, extra = streamed.batch, streamed.source_state, streamed.metrics
                self._step(
                    batch,
                    step,
                    started,
                    result,
                    on_step,
                    save_steps,
                    save_total_limit,
                    run_arguments,
                    stream=stream,
                    extra=extra,
                    source_state=state,
                )

    def _check_engine(self) -> None:
        if self._engine is not None:
            self._engine.check()

    def _saved_after(
        self,
        failure: InferenceServerError,
        result: TrainResult,
        run_arguments: dict[str, Any] | None,
        save_total_limit: int | None,
    ) -> InferenceServerError:
        """The engine failed: save what was trained (the last update made) as a
        checkpoint, unless there is one of it; the error, saying where it is."""
        if self._trained is None or self.output_dir is None:
            return InferenceServerError(f"{failure}\nThe run stopped before any update.")
        step, state = self._trained
        folder = checkpoint_path(self.output_dir, step)
        if not (folder / RUN_STATE_FILE).exists():
            self.save_state(folder)
            write_run_state(
                folder,
                step=step,
                steps=result.steps,
                source=self.source,
                arguments=run_arguments,
                source_state=state,
            )
            prune_checkpoints(self.output_dir, save_total_limit)
        return InferenceServerError(
            f"{failure}\nThe run stopped; what was trained through step {step} is saved in "
            f"{folder}. Fix the inference server and run the same command with --resume."
        )

    def _step(
        self,
        batch: TrajectoryBatch,
        step: int,
        started: float,
        result: TrainResult,
        on_step: StepCallback | None,
        save_steps: int,
        save_total_limit: int | None,
        run_arguments: dict[str, Any] | None,
        *,
        stream: RolloutStream | None = None,
        extra: dict[str, float] | None = None,
        source_state: dict[str, Any] | None = None,
    ) -> None:
        """Consume one step's batch, push the new weights to the engine, log the step,
        checkpoint it."""
        source = self.source
        if self._token_bound is not None:
            self.staleness = StalenessBound(step - 1, self._token_bound)
        try:
            all_discarded = not batch.groups and bool((extra or {}).get("groups_discarded"))
            with self.weight_update(step):
                if stream is not None and all_discarded:
                    # every group was too old (the stream logged it): nothing to consume
                    metrics: dict[str, float] = {"skipped": 1.0}
                else:
                    metrics = dict(self.consume(batch))
        finally:
            self.staleness = None
        self._trained = (step, source_state)
        step_metrics = StepMetrics.of_batch(batch, step)
        step_metrics.extra.update(extra or {})
        step_metrics.extra.update(
            reward_signal([e.final_reward for e in g.episodes] for g in batch.groups)
        )
        loss = metrics.pop("loss", None)
        step_metrics.loss = None if loss is None else float(loss)
        step_metrics.extra.update(metrics)
        if self._engine is not None:
            try:
                seconds = self._engine.push_weights(self.trained_model(), step)
            except InferenceServerError:
                step_metrics.seconds = time.perf_counter() - started
                result.steps.append(step_metrics)  # trained: saved with the step log
                raise
            step_metrics.extra["weight_sync_seconds"] = seconds
        if stream is not None:
            stream.advance(step)
        step_metrics.seconds = time.perf_counter() - started
        if self._evaluation is not None:  # not timed: the step's pace is training's
            evaluation, player = self._evaluation
            evaluation.after_step(step_metrics, player)
        result.steps.append(step_metrics)
        if on_step is not None:
            on_step(step_metrics)
        if save_steps and step % save_steps == 0 and self.output_dir is not None:
            folder = checkpoint_path(self.output_dir, step)
            self.save_state(folder)
            write_run_state(
                folder,
                step=step,
                steps=result.steps,
                source=source,
                arguments=run_arguments,
                source_state=source_state,
            )
            prune_checkpoints(self.output_dir, save_total_limit)


def policy_sampling(
    *,
    temperature: float,
    top_p: float,
    top_k: int,
    max_new_tokens: int,
    seed: int,
    batch_size: int,
) -> dict[str, Any]:
    """The TransformersAgent options of a trainer's own policy, in one place for every
    trainer that generates with the model it trains."""
    return {
        "temperature": temperature,
        "top_p": top_p,
        "top_k": top_k,
        "max_new_tokens": max_new_tokens,
        "seed": seed,
        "batch_size": batch_size,
    }
