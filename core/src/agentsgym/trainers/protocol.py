"""The TrainerAdapter protocol: the consuming end of the rollout pipeline.

A trainer adapter is anything with

    train(source: RolloutSource, *, max_steps: int, on_step=None, agent=None) -> TrainResult

An adapter that can checkpoint also takes ``save_steps``, ``save_total_limit``,
``resume_from`` (a checkpoint folder) and ``run_arguments`` (recorded in each
checkpoint, compared on resume); ``agentsgym train`` passes them only to adapters
whose ``train`` accepts them.

A :class:`~agentsgym.trainers.RolloutSource` holds the tasks (dataset rows) and plays
them: each call of ``source.play`` runs the agentsgym runner and returns a padded
:class:`~agentsgym.trajectory.TrajectoryBatch` (one group per task). The adapter
decides who plays (its own model, or the ``agent`` it is given), what it does with a
batch (a gradient step, a write to disk) and how often, and reports each step as a
:class:`StepMetrics`.

Adapters are registered through the ``register_trainers`` hook and built by name
with :func:`agentsgym.make_trainer`; the adapters of this project (``trl-grpo``,
``per-token-grpo``, ``dataset-sink``), a ``BatchTrainer`` base class with
checkpoints, and the ``train`` command ship in the agentsgym-trl distribution.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from agentsgym.agents import Agent
    from agentsgym.trainers.source import RolloutSource
    from agentsgym.trajectory import TrajectoryBatch


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
    def of_batch(cls, batch: TrajectoryBatch, step: int) -> StepMetrics:
        """Rollout statistics of a batch: reward mean and std, tokens, failures, and

        * ``truncated_replies``: the fraction of agent replies cut at the length limit
          (a policy that stops ending its turns shows here first);
        * ``split_episodes``: scored episodes split into several views;
        * ``token_source/<source>``: the fraction of steps whose ids came from each
          source (``sampled``, ``server``, ``unchecked``, ``retokenized``).
        """
        episodes = [e for group in batch.groups for e in group.episodes]
        rewards = [e.final_reward for e in episodes]
        metrics = cls(
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
