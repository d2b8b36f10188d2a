"""RolloutSource: the tasks a trainer trains on, and the runner that plays them."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentsgym.dataset_runner import run_dataset
from agentsgym.engine import DEFAULT_MAX_CONCURRENCY
from agentsgym.errors import TrainerOptionError
from agentsgym.factory import load_tokenizer
from agentsgym.rows import DatasetRow, parse_rows

if TYPE_CHECKING:
    from agentsgym.agents import Agent
    from agentsgym.engine import EpisodeCallback
    from agentsgym.env import MultistepEnv
    from agentsgym.trajectory import Episode, TrajectoryBatch

logger = logging.getLogger(__name__)


class RolloutSource:
    """Tasks to train on, and the runner that plays them.

    :param rows: dataset rows ``{env_class_path, env_config, task_data}`` (a
        ``datasets.Dataset`` works). Steps take them in order, ``tasks_per_step`` at
        a time, reshuffled (under ``seed``) each pass.
    :param tokenizer: the tokenizer every env is built with; it must be the policy
        model's tokenizer.
    :param num_rollouts: rollouts per task (the GRPO group size).
    :param tasks_per_step: tasks per training step.
    :param max_concurrency: trials played at once (see agentsgym.engine).
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
