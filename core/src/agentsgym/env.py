"""MultistepEnv: the base class of every agentsgym environment."""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, ClassVar

from agentsgym import randomness
from agentsgym.aio import run_sync, sync_twin
from agentsgym.config import EnvConfig
from agentsgym.engine import DEFAULT_MAX_CONCURRENCY, EPISODE_HOOK_NAMES, aplay_episode, arun_trial
from agentsgym.hookspecs import PROJECT_NAME
from agentsgym.plugins import new_plugin_manager
from agentsgym.rows import rows_to_dataset
from agentsgym.tokenization import ChatTokenizer

if TYPE_CHECKING:
    import datasets
    import numpy as np

    from agentsgym.agents import Agent
    from agentsgym.specs import EnvSpec
    from agentsgym.trajectory import Episode, TrajectoryBatch

logger = logging.getLogger(__name__)


class MultistepEnv:
    """A multi-step text environment, played through the episode hooks.

    Subclasses implement ``initialize_episode``, ``format_prompt`` and
    ``step_episode`` (optionally ``reward_shaping``) as ``@hookimpl`` methods, and
    declare their own env_config keys by subclassing :class:`EnvConfig` and setting
    ``config_class``. Everything task-specific arrives in ``task_data``.

    :param tokenizer: a Hugging Face tokenizer with a chat template, or ``None`` to
        play episodes without token fields (messages and rewards only).
    :param env_config: settings constant across tasks, validated by
        ``config_class``.
    :param plugins: extra plugin objects registered in this env's hook relay
        (wrappers around steps, reward-shaping terms, loggers).
    """

    config_class: ClassVar[type[EnvConfig]] = EnvConfig
    run_hooks_inline: bool = False
    """Set to ``True`` when every hook only computes on the state for microseconds and
    never waits (board games, puzzles, an offline judge): the runner then calls the
    turns on its event loop instead of handing each to a worker thread, which costs
    more than such a turn. A hook that waits (a network call, a model, a sleep) would
    stall every episode: leave it ``False`` or write that hook ``async def``."""

    def __init__(
        self,
        tokenizer: Any = None,
        env_config: dict[str, Any] | None = None,
        *,
        plugins: Iterable[object] = (),
    ) -> None:
        self.config = self.config_class.parse(env_config, env_name=type(self).__name__)
        self.env_config: dict[str, Any] = self.config.model_dump()
        self.tokenizer = tokenizer
        self.chat = (
            ChatTokenizer(tokenizer, self.config.chat_template_kwargs)
            if tokenizer is not None
            else None
        )
        self.spec: EnvSpec | None = None
        self.sessions: dict[str, dict[str, Any]] = {}
        self.plugin_manager = new_plugin_manager()
        self._check_hook_markers()
        self.plugin_manager.register(self, name=f"env:{type(self).__qualname__}:{id(self):x}")
        for plugin in plugins:
            self.plugin_manager.register(plugin)

    @property
    def hook(self) -> Any:
        """This env's hook relay: ``env.hook.step_episode(env=env, state=..., action=...)``."""
        return self.plugin_manager.hook

    @property
    def env_id(self) -> str:
        """The registered id when built by ``make``, else ``module:Class``."""
        if self.spec is not None:
            return self.spec.id
        cls = type(self)
        return f"{cls.__module__}:{cls.__qualname__}"

    def _check_hook_markers(self) -> None:
        for name in EPISODE_HOOK_NAMES:
            method = getattr(type(self), name, None)
            if method is not None and not hasattr(method, f"{PROJECT_NAME}_impl"):
                raise TypeError(
                    f"{type(self).__name__}.{name} is not marked as a hook implementation; "
                    "decorate it with @agentsgym.hookimpl"
                )

    # --------------------------------------------------------------- sessions
    def new_session(self, task_data: dict[str, Any], session_id: str | None = None) -> str:
        """Register a task under a session id (a fresh one unless given)."""
        session_id = session_id or uuid.uuid4().hex[:16]
        self.sessions[session_id] = dict(task_data)
        return session_id

    def _run_complete_episode(
        self, session_id: str, agent: Agent, agent_state: Any = None
    ) -> Episode:
        """Play one episode of the task registered under ``session_id``; unpadded."""
        return run_sync(aplay_episode(self, session_id, agent, agent_state))

    async def arun_trial(
        self,
        task_data_list: list[dict[str, Any]],
        agent: Agent,
        num_rollouts: int = 1,
        *,
        max_concurrency: int | None = None,
        seed: int = 0,
        on_episode: Callable[[Episode], None] | None = None,
    ) -> TrajectoryBatch:
        """Play ``num_rollouts`` trials per task and pad each task's group.

        Trials run concurrently as asyncio tasks, up to ``max_concurrency`` at once
        (default :data:`agentsgym.engine.DEFAULT_MAX_CONCURRENCY`, 64); plain agents
        and env hooks run in a thread pool of that size. ``seed`` is the run seed
        agents' per-rollout seeds derive from. ``on_episode`` is called after every
        finished episode (progress bars).
        """
        return await arun_trial(
            self,
            task_data_list,
            agent,
            num_rollouts,
            max_concurrency=max_concurrency or DEFAULT_MAX_CONCURRENCY,
            seed=seed,
            on_episode=on_episode,
        )

    run_trial = sync_twin(arun_trial)

    # --------------------------------------------------------------- randomness
    @staticmethod
    def task_seed(task_data: Mapping[str, Any]) -> int:
        """The task's seed: ``task_data["seed"]``, or one derived from its content."""
        return randomness.task_seed(task_data)

    @staticmethod
    def episode_random(task_data: Mapping[str, Any]) -> random.Random:
        """A ``random.Random`` of the episode's own, seeded from its task (keep it in the
        state); never the global one, which concurrent episodes share."""
        return randomness.episode_random(task_data)

    @staticmethod
    def episode_numpy_rng(task_data: Mapping[str, Any]) -> np.random.Generator:
        """A numpy ``Generator`` of the episode's own, seeded from its task."""
        return randomness.episode_numpy_rng(task_data)

    @staticmethod
    def global_random(rng: random.Random) -> AbstractContextManager[random.Random]:
        """``with env.global_random(state.rng):`` around calls into a library that draws
        from the global ``random`` (TextArena): the global state is the episode's own
        for the block, under a process-wide lock (see :mod:`agentsgym.randomness`)."""
        return randomness.global_random(rng)

    # --------------------------------------------------------------- datasets
    def get_train_dataset(self) -> datasets.Dataset:
        """Training tasks as rows ``{env_class_path, env_config, task_data}``."""
        raise NotImplementedError(f"{type(self).__name__} ships no train dataset")

    def get_eval_dataset(self) -> datasets.Dataset:
        """Evaluation tasks as rows ``{env_class_path, env_config, task_data}``."""
        raise NotImplementedError(f"{type(self).__name__} ships no eval dataset")

    def make_dataset(self, task_data_list: Iterable[dict[str, Any]]) -> datasets.Dataset:
        """Rows for this env instance, one per task (``get_*_dataset`` helpers use it)."""
        config = self.row_env_config()
        return rows_to_dataset(
            {"env_class_path": self.env_id, "env_config": config, "task_data": task}
            for task in task_data_list
        )

    def row_env_config(self) -> dict[str, Any]:
        """The env_config written into dataset rows: the full effective config.

        Every key is written, defaults included, so a dataset keeps its meaning when a
        package changes its defaults. Rows end up in files that are shared; override
        this to leave out secrets (API keys belong in the environment, not in a
        dataset).
        """
        return self.config.model_dump(mode="json")
