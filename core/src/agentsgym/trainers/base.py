"""The TrainerAdapter interface: the consuming end of the rollout pipeline.

A trainer adapter is anything with

    train(source: RolloutSource, *, max_steps: int, on_step=None, agent=None) -> TrainResult

An adapter that can checkpoint also takes ``save_steps``, ``save_total_limit``,
``resume_from`` (a checkpoint folder) and ``run_arguments`` (recorded in each
checkpoint, compared on resume; see :mod:`agentsgym.trainers.checkpoints`);
``agentsgym train`` passes them only to adapters whose ``train`` accepts them.

A :class:`RolloutSource` holds the tasks (dataset rows) and plays them: each call of
:meth:`RolloutSource.play` runs the agentsgym runner and returns a padded
:class:`~agentsgym.trajectory.TrajectoryBatch` (one group per task). The adapter
decides who plays (its own model, or the ``agent`` it is given), what it does with a
batch (a gradient step, a write to disk) and how often.

Most adapters consume one batch per step; they subclass :class:`BatchTrainer` and
implement :meth:`BatchTrainer.consume` (plus :meth:`BatchTrainer.policy` when they
own a model, and :meth:`BatchTrainer.save_state` / :meth:`BatchTrainer.load_state`
when they hold state a checkpoint must keep). Adapters whose training library drives its own loop (``trl-grpo``:
TRL's ``GRPOTrainer`` pulls rollouts through its ``rollout_func``) implement
``train`` directly and call ``source.play`` from inside that loop.

Adapters are registered through the ``register_trainers`` hook and built by name
with :func:`agentsgym.make_trainer`.
"""

from __future__ import annotations

import json
import logging
import random
import statistics
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentsgym.dataset_runner import run_dataset
from agentsgym.errors import TrainerOptionError
from agentsgym.factory import load_tokenizer
from agentsgym.rows import DatasetRow, parse_rows
from agentsgym.runner import DEFAULT_MAX_CONCURRENCY
from agentsgym.trajectory import Episode, TrajectoryBatch

if TYPE_CHECKING:
    from agentsgym.agents import Agent
    from agentsgym.env import MultistepEnv
    from agentsgym.runner import EpisodeCallback

logger = logging.getLogger(__name__)


@dataclass
class StepMetrics:
    """What one training step did; passed to ``on_step`` and kept in the result."""

    step: int
    loss: float | None = None
    mean_reward: float | None = None
    num_rollouts: int = 0
    num_failed: int = 0
    num_tokens: int = 0
    num_agent_tokens: int = 0
    seconds: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "loss": self.loss,
            "mean_reward": self.mean_reward,
            "num_rollouts": self.num_rollouts,
            "num_failed": self.num_failed,
            "num_tokens": self.num_tokens,
            "num_agent_tokens": self.num_agent_tokens,
            "seconds": self.seconds,
            **self.extra,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepMetrics:
        """The inverse of :meth:`to_dict` (a checkpoint's step log)."""
        known = {f for f in cls.__dataclass_fields__ if f != "extra"}
        metrics = cls(**{k: v for k, v in data.items() if k in known})
        metrics.extra = {
            k: float(v) for k, v in data.items() if k not in known and isinstance(v, (int, float))
        }
        return metrics


@dataclass
class TrainResult:
    """The steps an adapter ran and where it put its output."""

    steps: list[StepMetrics] = field(default_factory=list)
    output_dir: Path | None = None
    artifacts: dict[str, str] = field(default_factory=dict)

    @property
    def num_steps(self) -> int:
        return len(self.steps)

    @property
    def final_loss(self) -> float | None:
        losses = [s.loss for s in self.steps if s.loss is not None]
        return losses[-1] if losses else None

    @property
    def mean_reward(self) -> float | None:
        rewards = [s.mean_reward for s in self.steps if s.mean_reward is not None]
        return statistics.fmean(rewards) if rewards else None

    def write_log(self, path: str | Path) -> Path:
        """One JSON object per step (JSON lines)."""
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("w", encoding="utf-8") as handle:
            for step in self.steps:
                handle.write(json.dumps(step.to_dict()) + "\n")
        return out


StepCallback = Callable[[StepMetrics], None]


class RolloutSource:
    """Tasks to train on, and the runner that plays them.

    :param rows: dataset rows ``{env_class_path, env_config, task_data}`` (a
        ``datasets.Dataset`` works). Steps take them in order, ``tasks_per_step`` at
        a time, reshuffled (under ``seed``) each pass.
    :param tokenizer: the tokenizer every env is built with; it must be the policy
        model's tokenizer.
    :param num_rollouts: rollouts per task (the GRPO group size).
    :param tasks_per_step: tasks per training step.
    :param max_concurrency: trials played at once (see agentsgym.runner).
    :param on_episode: called after every finished episode (progress bars).

    Env instances are built once per (env_class_path, env_config) and reused.
    """

    def __init__(
        self,
        rows: Iterable[Mapping[str, Any] | DatasetRow],
        *,
        tokenizer: Any,
        num_rollouts: int = 4,
        tasks_per_step: int = 2,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        allow_class_paths: bool | Sequence[str] | None = None,
        shuffle: bool = True,
        seed: int = 0,
        on_episode: EpisodeCallback | None = None,
    ) -> None:
        self.rows = parse_rows(rows)
        if not self.rows:
            raise TrainerOptionError("RolloutSource needs at least one dataset row")
        if num_rollouts < 1 or tasks_per_step < 1 or max_concurrency < 1:
            raise TrainerOptionError(
                "num_rollouts, tasks_per_step and max_concurrency must be at least 1"
            )
        self.tokenizer = load_tokenizer(tokenizer)
        self.num_rollouts = num_rollouts
        self.tasks_per_step = tasks_per_step
        self.max_concurrency = max_concurrency
        self.allow_class_paths = allow_class_paths
        self.shuffle = shuffle
        self.on_episode = on_episode
        self._rng = random.Random(seed)
        self._order: list[int] = []
        self._envs: dict[tuple[str, str], MultistepEnv] = {}

    def state_dict(self) -> dict[str, Any]:
        """Where the source is in its tasks (kept in training checkpoints)."""
        version, internal, gauss = self._rng.getstate()
        return {"rng": [version, list(internal), gauss], "order": list(self._order)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state_dict`: the same tasks come next."""
        if not state:
            return
        version, internal, gauss = state["rng"]
        self._rng.setstate((version, tuple(internal), gauss))
        order = [int(i) for i in state["order"]]
        if any(not 0 <= i < len(self.rows) for i in order):
            raise TrainerOptionError(
                "the checkpoint's task order does not fit this run's tasks (did --num-tasks "
                "or the dataset change?)"
            )
        self._order = order

    def next_rows(self, count: int | None = None) -> list[DatasetRow]:
        """The next ``count`` (default ``tasks_per_step``) rows, cycling through all."""
        wanted = self.tasks_per_step if count is None else count
        taken: list[DatasetRow] = []
        while len(taken) < wanted:
            if not self._order:
                self._order = list(range(len(self.rows)))
                if self.shuffle:
                    self._rng.shuffle(self._order)
            taken.append(self.rows[self._order.pop(0)])
        return taken

    def play(
        self,
        rows: Sequence[Mapping[str, Any] | DatasetRow],
        agent: Agent,
        num_rollouts: int | None = None,
    ) -> TrajectoryBatch:
        """Play ``num_rollouts`` trials of every row; group ``i`` of the batch is row ``i``.

        Rows of one env instance play concurrently (up to ``max_concurrency``).
        """
        return run_dataset(
            rows,
            agent,
            self.num_rollouts if num_rollouts is None else num_rollouts,
            tokenizer=self.tokenizer,
            allow_class_paths=self.allow_class_paths,
            max_concurrency=self.max_concurrency,
            on_episode=self.on_episode,
            envs=self._envs,
        )

    def is_multi_turn(self, episode: Episode) -> bool:
        """Whether the episode's env allows more than one agent action per episode
        (``max_steps_per_episode > 1`` in any config of it played so far)."""
        limits = [
            env.config.max_steps_per_episode
            for env in self._envs.values()
            if env.env_id == episode.env_id
        ]
        return max(limits, default=2) > 1 or episode.num_turns > 1

    def close(self) -> None:
        """Close env instances that hold resources (a ``close()`` method)."""
        for env in self._envs.values():
            closer = getattr(env, "close", None)
            if callable(closer):
                try:
                    closer()
                except Exception:  # closing must not mask a training result
                    logger.exception("closing env %s failed", env.env_id)
        self._envs.clear()


@runtime_checkable
class TrainerAdapter(Protocol):
    """The consuming end of the pipeline (see the module docstring)."""

    def train(
        self,
        source: RolloutSource,
        *,
        max_steps: int,
        on_step: StepCallback | None = None,
        agent: Agent | None = None,
    ) -> TrainResult:
        """Run ``max_steps`` steps on rollouts from ``source``.

        :param source: the tasks and the runner.
        :param max_steps: training steps (optimizer steps for a trainer; batches
            written for a sink).
        :param on_step: called with each step's :class:`StepMetrics`.
        :param agent: who plays the rollouts. Trainers that own a model play with it
            by default; sinks need an agent.
        :return: the steps run and where the output went.
        """
        ...


class BatchTrainer(ABC):
    """An adapter that consumes one padded :class:`TrajectoryBatch` per step."""

    output_dir: Path | None = None
    source: RolloutSource | None = None
    """The source of the running ``train`` call (for ``consume`` to ask it about envs)."""

    def policy(self) -> Agent | None:
        """The agent playing this trainer's own model, or ``None`` if it has none."""
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
        """Run steps ``1..max_steps`` (from the step after ``resume_from``'s).

        Every ``save_steps`` steps a checkpoint is written to
        ``output_dir/checkpoint-N`` (see :mod:`agentsgym.trainers.checkpoints`),
        keeping the newest ``save_total_limit``.
        """
        from agentsgym.trainers.checkpoints import (
            checkpoint_path,
            prune_checkpoints,
            read_run_state,
            write_run_state,
        )

        if max_steps < 1:
            raise TrainerOptionError(f"max_steps must be at least 1, got {max_steps}")
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
        for step in range(first, max_steps + 1):
            started = time.perf_counter()
            batch = source.play(source.next_rows(), player)
            metrics = dict(self.consume(batch))
            step_metrics = batch_metrics(batch, step)
            loss = metrics.pop("loss", None)
            step_metrics.loss = None if loss is None else float(loss)
            step_metrics.extra.update(metrics)
            step_metrics.seconds = time.perf_counter() - started
            result.steps.append(step_metrics)
            if on_step is not None:
                on_step(step_metrics)
            if save_steps and step % save_steps == 0 and self.output_dir is not None:
                folder = checkpoint_path(self.output_dir, step)
                self.save_state(folder)
                write_run_state(
                    folder, step=step, steps=result.steps, source=source, arguments=run_arguments
                )
                prune_checkpoints(self.output_dir, save_total_limit)
        self.finish(result)
        return result


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


def batch_metrics(batch: TrajectoryBatch, step: int) -> StepMetrics:
    """Rollout statistics of a batch: reward mean and std, tokens, failures, and

    * ``truncated_replies``: the fraction of agent replies cut at the length limit
      (a policy that stops ending its turns shows here first);
    * ``split_episodes``: scored episodes split into several views;
    * ``token_source/<source>``: the fraction of steps whose ids came from each
      source (``sampled``, ``server``, ``unchecked``, ``retokenized``).
    """
    episodes = [e for group in batch.groups for e in group.episodes]
    rewards = [e.final_reward for e in episodes]
    metrics = StepMetrics(
        step=step,
        mean_reward=statistics.fmean(rewards) if rewards else None,
        num_rollouts=len(episodes),
        num_failed=len(batch.failed),
        num_tokens=sum(e.num_tokens for e in episodes),
        num_agent_tokens=sum(e.num_agent_tokens for e in episodes),
    )
    if rewards:
        metrics.extra["reward_std"] = statistics.pstdev(rewards)
    steps = [s for e in episodes for s in e.steps]
    if steps:
        metrics.extra["truncated_replies"] = sum(s.reply_truncated for s in steps) / len(steps)
        sources: dict[str, int] = {}
        for s in steps:
            if s.token_source is not None:
                sources[s.token_source] = sources.get(s.token_source, 0) + 1
        for source, count in sorted(sources.items()):
            metrics.extra[f"token_source/{source}"] = count / len(steps)
    metrics.extra["split_episodes"] = float(sum(len(e.segments) > 1 for e in episodes))
    return metrics
