"""Trainer adapters: the consuming end of the rollout pipeline (docs/training.md).

An adapter's ``train`` plays tasks through its :class:`RolloutSource`, decides who plays
and what each padded batch is for (a gradient step, a write to disk), and reports each
step as a :class:`StepMetrics`. Adapters (and the ``agentsgym train`` command) come
with plugin distributions, registered through ``register_trainers``.
"""

from __future__ import annotations

import json
import logging
import random
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentsgym.dataset_runner import run_dataset
from agentsgym.engine import DEFAULT_MAX_CONCURRENCY
from agentsgym.errors import TrainerOptionError, is_reward_unavailable
from agentsgym.executors import build_envs
from agentsgym.factory import load_tokenizer
from agentsgym.game_outcomes import win_draw_loss
from agentsgym.rows import DatasetRow, parse_rows

if TYPE_CHECKING:
    from agentsgym.agents import Agent
    from agentsgym.engine import EpisodeCallback
    from agentsgym.env import MultistepEnv
    from agentsgym.trajectory import Episode, TrajectoryBatch

__all__ = ["RolloutSource", "StepCallback", "StepMetrics", "TrainResult", "TrainerAdapter"]

logger = logging.getLogger(__name__)


@dataclass
class StepMetrics:
    """What one training step did; passed to ``on_step`` and kept in the result."""

    step: int
    loss: float | None = None
    mean_reward: float | None = None
    num_rollouts: int = 0
    num_failed: int = 0
    num_reward_unavailable: int = 0
    """Failed episodes whose reward could not be computed (a judge failed)."""
    num_tokens: int = 0
    num_agent_tokens: int = 0
    seconds: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The fields, with ``extra``'s keys inlined."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        return {**data, **self.extra}

    @classmethod
    def of_batch(cls, batch: TrajectoryBatch, step: int) -> StepMetrics:
        """Rollout statistics of a batch: reward mean and std (and, in an env with roles,
        ``reward/<role>``, the mean reward of each role's groups, and for a game whose
        ``role_rewards`` give outcomes ``win_rate/<role>``, ``draw_rate/<role>`` and
        ``loss_rate/<role>``: a failed game is a loss), tokens, failures, the
        fraction of ``truncated_replies``, ``split_episodes`` (scored episodes split into
        several views) and ``token_source/<source>`` (fraction of steps whose ids came
        from each source); docs/training.md explains them."""
        episodes = [e for group in batch.groups for e in group.episodes]
        rewards = [e.final_reward for e in episodes]
        metrics = cls(
            step=step,
            mean_reward=statistics.fmean(rewards) if rewards else None,
            num_rollouts=len(episodes),
            num_failed=len(batch.failed),
            num_reward_unavailable=sum(is_reward_unavailable(e.error) for e in batch.failed),
            num_tokens=sum(e.num_tokens for e in episodes),
            num_agent_tokens=sum(e.num_agent_tokens for e in episodes),
        )
        if rewards:
            metrics.extra["reward_std"] = statistics.pstdev(rewards)
        metrics.extra.update(role_figures(batch))
        steps = [s for e in episodes for s in e.steps]
        if steps:
            metrics.extra["truncated_replies"] = sum(s.reply_truncated for s in steps) / len(steps)
            sources = Counter(s.token_source for s in steps if s.token_source is not None)
            for source, count in sorted(sources.items()):
                metrics.extra[f"token_source/{source}"] = count / len(steps)
        metrics.extra["split_episodes"] = float(sum(len(e.segments) > 1 for e in episodes))
        return metrics

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepMetrics:
        """The inverse of :meth:`to_dict` (a checkpoint's step log)."""
        known = {f.name for f in fields(cls)} - {"extra"}
        numbers = {k: float(v) for k, v in data.items() if isinstance(v, (int, float))}
        extra = {k: v for k, v in numbers.items() if k not in known}
        return cls(**{k: v for k, v in data.items() if k in known}, extra=extra)


def role_figures(batch: TrajectoryBatch) -> dict[str, float]:
    """Each role's mean reward, and its win, draw and loss rates where its games give
    outcomes (see :meth:`StepMetrics.of_batch`)."""
    rewards: dict[str, list[float]] = {}
    outcomes: dict[str, list[float | None]] = {}
    for group in batch.groups:
        if group.role is None:
            continue
        rewards.setdefault(group.role, []).extend(e.final_reward for e in group.episodes)
        played = outcomes.setdefault(group.role, [])
        played.extend(e.metrics.get("outcome") for e in group.episodes)
        played.extend(None for _ in group.failed)
    figures: dict[str, float] = {}
    for role, values in sorted(rewards.items()):
        if values:
            figures[f"reward/{role}"] = statistics.fmean(values)
        if any(outcome is not None for outcome in outcomes[role]):
            rates = win_draw_loss(outcomes[role])
            for name, rate in zip(("win_rate", "draw_rate", "loss_rate"), rates):
                figures[f"{name}/{role}"] = rate
    return figures


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
        """Run ``max_steps`` steps (optimizer steps, or batches written for a sink) on
        rollouts from ``source``, calling ``on_step`` after each. ``agent`` plays them:
        trainers that own a model play with it by default; sinks need an agent."""
        ...


class RolloutSource:
    """Tasks to train on (dataset rows, a ``datasets.Dataset`` works), and the runner that
    plays them with the policy model's ``tokenizer``. Steps take the rows
    ``tasks_per_step`` at a time, reshuffled (under ``seed``) each pass; ``num_rollouts``
    is the GRPO group size. Env instances are built once per (env_class_path,
    env_config) and reused. ``executor`` (a registered name such as ``"ray"``, or an
    executor object) and ``executor_options`` say where the trials play, as for
    :func:`~agentsgym.runtime.run_dataset`; a remote executor needs the agent as a recipe
    (:class:`~agentsgym.runtime.AgentSpec`) and the tokenizer as a name or path, which each
    worker loads. ``allow_class_paths`` and ``allow_remote`` say which ``module:Class``
    paths and env server URLs the rows may name (as for ``run_dataset``; ``None``: the
    environment's ``AGENTSGYM_ALLOW_*``): ``agentsgym train`` allows the env its command
    line names, a URL included."""

    def __init__(
        self,
        rows: Iterable[Mapping[str, Any] | DatasetRow],
        *,
        tokenizer: Any,
        num_rollouts: int = 4,
        tasks_per_step: int = 2,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        allow_class_paths: bool | Sequence[str] | None = None,
        allow_remote: bool | Sequence[str] | None = None,
        shuffle: bool = True,
        seed: int = 0,
        on_episode: EpisodeCallback | None = None,
        executor: Any = "local",
        executor_options: Mapping[str, Any] | None = None,
        opponents: Mapping[str, Any] | None = None,
    ) -> None:
        self.rows = parse_rows(rows)
        if not self.rows:
            raise TrainerOptionError("RolloutSource needs at least one dataset row")
        if num_rollouts < 1 or tasks_per_step < 1 or max_concurrency < 1:
            raise TrainerOptionError(
                "num_rollouts, tasks_per_step and max_concurrency must be at least 1"
            )
        self.tokenizer = load_tokenizer(tokenizer)
        self._tokenizer_source = tokenizer if isinstance(tokenizer, (str, Path)) else None
        self.num_rollouts = num_rollouts
        self.tasks_per_step = tasks_per_step
        self.max_concurrency = max_concurrency
        self.allow_class_paths = allow_class_paths
        self.allow_remote = allow_remote
        self.shuffle = shuffle
        self.on_episode = on_episode
        self.executor = executor
        self.executor_options = dict(executor_options or {})
        self.opponents = dict(opponents or {})
        """The agents of roles the policy does not play, by role (envs with roles): the
        policy plays every other role. Keep those roles out of training with the env's
        ``trainable_roles``."""
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
        """Play ``num_rollouts`` trials of every row; group ``i`` of the batch is row ``i``."""
        rollouts = self.num_rollouts if num_rollouts is None else num_rollouts
        player = {None: agent, **self.opponents} if self.opponents else agent
        return run_dataset(
            rows,
            player,
            rollouts,
            tokenizer=self._tokenizer_for_executor(),
            envs=self._envs,
            allow_class_paths=self.allow_class_paths,
            allow_remote=self.allow_remote,
            max_concurrency=self.max_concurrency,
            on_episode=self.on_episode,
            executor=self.executor,
            executor_options=self.executor_options or None,
        )

    def trained_roles_of(self, row: Mapping[str, Any] | DatasetRow) -> tuple[str, ...] | None:
        """The roles whose groups :meth:`play` returns for ``row``: its env's trainable
        roles (``None``: an env without roles, one group per task). A trainer checks them
        before it plays; the env is built now, and kept for :meth:`play`."""
        (parsed,) = parse_rows([row])
        envs = build_envs(
            [parsed],
            tokenizer=self.tokenizer,
            allow_class_paths=self.allow_class_paths,
            envs=self._envs,
            allow_remote=self.allow_remote,
        )
        env = envs[parsed.env_key()]
        return env.trainable_roles if env.role_names else None

    def _tokenizer_for_executor(self) -> Any:
        """The loaded tokenizer, or for a remote executor its name (each worker loads it)."""
        if not isinstance(self.executor, str) or self.executor == "local":
            return self.tokenizer  # an executor object is the caller's to match
        if self._tokenizer_source is None:
            raise TrainerOptionError(
                f"the {self.executor} executor loads the tokenizer in each worker: give "
                "RolloutSource the tokenizer's name or path, not a loaded tokenizer"
            )
        return str(self._tokenizer_source)

    def is_multi_turn(self, episode: Episode) -> bool:
        """Whether the episode's env allows more than one agent action per episode
        (``max_steps_per_episode > 1`` in any config of it played so far)."""
        envs = [env for env in self._envs.values() if env.env_id == episode.env_id]
        limits = [env.config.max_steps_per_episode for env in envs]
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
