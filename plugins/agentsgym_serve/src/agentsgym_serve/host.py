"""The env instances a server plays, and the episodes it starts on them.

The server serves one env id. Clients may layer their own ``env_config`` over the
served one (unless the server locks it); each distinct effective config gets one env
instance, built on first use and shared by every session with that config, exactly
as the runner shares one instance between the episodes of a dataset's rows.

An episode on the server is the core's :class:`~agentsgym.runtime.EpisodeSession`, the
object the local engine drives too: the same hooks, run the same way
(:class:`~agentsgym.runtime.HookRuntime`: a plain env's hooks of one request in one
worker thread, an ``async def`` env's on the server's event loop, within the env's
``hook_timeout_seconds``), the same checks of what they return, the same tool turns,
truncation and reward terms. So what a client receives is what a local episode would
have recorded. The server builds its envs without a tokenizer: tokens are the
client's business.

A client of one role of an env with roles is never sent what the other roles keep
private (``Role.private``, ``MultistepEnv.task_for_role``): the tasks of a dataset are
sent as that role may see them, with a reference (:data:`TASK_REF_KEY`) by which the
server plays the whole task when the client sends the task back.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentsgym import Messages, MultistepEnv
from agentsgym.errors import EnvConfigError
from agentsgym.runtime import EpisodeSession, HookRuntime, WorkerPool, redact
from agentsgym_serve.errors import BadEnvConfig, ConfigLocked, EnvFailure, NoTask, ServerFull

if TYPE_CHECKING:
    from agentsgym.runtime import EnvSpec

logger = logging.getLogger("agentsgym_serve")

DEFAULT_MAX_ENV_CONFIGS = 16
DEFAULT_THREADS = 32
SPLITS = ("train", "eval")
TOOLS_KEPT = 4096
"""The tasks whose tool schemas a server keeps (the oldest asked are dropped past it)."""
TASK_REF_KEY = "agentsgym_task"
"""The key of a task shown to a client in part (an env with roles hides the other roles'
private keys): ``"train:3"``, the split and row the server plays when it comes back."""


@dataclass
class HostedEnv:
    """One env instance, its config key and its hook runtime."""

    key: str
    env: MultistepEnv
    runtime: HookRuntime
    public_config: dict[str, Any]


def observation_text(messages: Messages) -> str:
    """Messages as the one observation string of AgentGym's protocol."""
    return "\n\n".join(m["content"] for m in messages)


class EnvHost:
    """Builds, caches and plays the env instances of one served env id.

    :param env_id: a registered id, or an allowed ``module:Class`` path.
    :param env_config: the served config, layered over the id's registered defaults.
    :param lock_config: refuse client configs that differ from the served one.
    :param max_env_configs: distinct client configs held at once.
    :param threads: worker threads for plain hooks (requests beyond wait for one).
    :param plugins: extra plugins for every env instance's hook relay.
    """

    def __init__(
        self,
        env_id: str,
        env_config: dict[str, Any] | None = None,
        *,
        allow_class_paths: bool | Sequence[str] | None = None,
        lock_config: bool = False,
        max_env_configs: int = DEFAULT_MAX_ENV_CONFIGS,
        threads: int = DEFAULT_THREADS,
        plugins: Sequence[object] = (),
    ) -> None:
        from agentsgym import make
        from agentsgym.runtime import resolve

        self.spec: EnvSpec = resolve(env_id, allow_class_paths=allow_class_paths)
        self.served_config = dict(env_config or {})
        self.lock_config = lock_config
        self.max_env_configs = max(1, max_env_configs)
        self.plugins = tuple(plugins)
        self._allow_class_paths = allow_class_paths
        self._make = make
        self.pool = WorkerPool(threads, name="agentsgym-serve")
        # Built now, so that a bad id or config fails at start-up, not on a request.
        default = make(
            env_id,
            tokenizer=None,
            env_config=self.served_config,
            allow_class_paths=allow_class_paths,
            plugins=self.plugins,
        )
        self.env_class: type[MultistepEnv] = type(default)
        self.default_key = self.config_key({})
        self.envs: dict[str, HostedEnv] = {
            self.default_key: self._hosted(self.default_key, default)
        }
        self._building: dict[str, asyncio.Lock] = {}
        self._datasets: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._tools: OrderedDict[str, list[dict[str, Any]] | None] = OrderedDict()

    def close(self) -> None:
        self.pool.close()

    # ------------------------------------------------------------------ configs
    @property
    def default(self) -> HostedEnv:
        return self.envs[self.default_key]

    def _hosted(self, key: str, env: MultistepEnv) -> HostedEnv:
        # What every client is shown: an env that kept a secret in its row config (an
        # api_key, a URL with credentials) must not hand it to whoever asks.
        public = redact(env.row_env_config())
        return HostedEnv(key, env, HookRuntime(env, self.pool), public)

    def config_key(self, client_config: dict[str, Any]) -> str:
        """The key of the effective config for a client's ``env_config`` (validated)."""
        layered = {**self.spec.default_env_config, **self.served_config, **client_config}
        try:
            # named by its id, as make() names it: a client sees the local message
            config = self.env_class.config_class.parse(layered, env_name=self.spec.id)
        except EnvConfigError as exc:
            raise BadEnvConfig(str(exc)) from None
        key = json.dumps(config.model_dump(mode="json"), sort_keys=True, default=str)
        if self.lock_config and client_config and key != self.default_key:
            raise ConfigLocked(
                "this server serves one env_config and was started with --lock-config; "
                "leave env_config out (GET /agentsgym/v1/env shows the served one)"
            )
        return key

    async def hosted(
        self, client_config: dict[str, Any], in_use: Callable[[str], bool]
    ) -> HostedEnv:
        """The env instance for a client config, built on first use.

        ``in_use(key)`` says whether live sessions still play an instance; unused
        instances are dropped when more than ``max_env_configs`` are held.
        """
        key = self.config_key(client_config) if client_config else self.default_key
        hosted = self.envs.get(key)
        if hosted is not None:
            return hosted
        lock = self._building.setdefault(key, asyncio.Lock())
        async with lock:
            hosted = self.envs.get(key)
            if hosted is not None:
                return hosted
            self._evict(in_use)
            if len(self.envs) >= self.max_env_configs:
                raise ServerFull(
                    f"{len(self.envs)} distinct env configs are in use, the server's maximum "
                    "(--max-env-configs); retry when sessions close, or use the served config"
                )
            config = {**self.served_config, **client_config}
            try:
                env = await self.pool.run(
                    lambda: self._make(
                        self.spec.id,
                        tokenizer=None,
                        env_config=config,
                        allow_class_paths=self._allow_class_paths,
                        plugins=self.plugins,
                    )
                )
            except EnvConfigError as exc:
                raise BadEnvConfig(str(exc)) from None
            except Exception as exc:  # noqa: BLE001 (the env's own failure, reported)
                raise EnvFailure(f"building the env failed: {type(exc).__name__}: {exc}") from None
            hosted = self._hosted(key, env)
            self.envs[key] = hosted
            logger.info(
                "env built", extra={"fields": {"event": "env_built", "configs": len(self.envs)}}
            )
        self._building.pop(key, None)
        return hosted

    def _evict(self, in_use: Callable[[str], bool]) -> None:
        for key in list(self.envs):
            if len(self.envs) < self.max_env_configs:
                return
            if key != self.default_key and not in_use(key):
                del self.envs[key]
                self._datasets = {k: v for k, v in self._datasets.items() if k[0] != key}

    # ------------------------------------------------------------------ tools
    @property
    def has_tools(self) -> bool:
        """Whether the env class gives its episodes tools (implements ``episode_tools``)."""
        return self.env_class.episode_tools is not MultistepEnv.episode_tools

    async def tool_schemas(
        self, hosted: HostedEnv, task_data: dict[str, Any]
    ) -> list[dict[str, Any]] | None:
        """The schemas of a task's episode tools (``None``: it has none), which a client
        renders its prompts with before its episode starts; kept for the next asks."""
        key = json.dumps([hosted.key, task_data], sort_keys=True, default=str)
        if key in self._tools:
            self._tools.move_to_end(key)
            return self._tools[key]
        try:
            toolbox = await self.pool.run(hosted.env.episode_tools, task_data)
        except Exception as exc:  # noqa: BLE001 (the env's own failure, reported)
            raise EnvFailure(f"episode_tools: {type(exc).__name__}: {exc}") from None
        schemas = None if toolbox is None else [dict(s) for s in toolbox.schemas]
        self._tools[key] = schemas
        while len(self._tools) > TOOLS_KEPT:
            self._tools.popitem(last=False)
        return schemas

    # ------------------------------------------------------------------ datasets
    def splits(self) -> list[str]:
        """The dataset splits the env class implements."""
        names = []
        for split in SPLITS:
            method = getattr(self.env_class, f"get_{split}_dataset")
            if method is not getattr(MultistepEnv, f"get_{split}_dataset"):
                names.append(split)
        return names

    async def tasks(self, hosted: HostedEnv, split: str) -> list[dict[str, Any]]:
        """The task_data of every row of a split (built once per instance, in a thread)."""
        if split not in SPLITS:
            raise NoTask(f"no dataset split {split!r}; splits are {', '.join(SPLITS)}")
        cached = self._datasets.get((hosted.key, split))
        if cached is not None:
            return cached
        lock = self._building.setdefault(f"{split}:{hosted.key}", asyncio.Lock())
        async with lock:  # one build, however many sessions ask at once
            cached = self._datasets.get((hosted.key, split))
            if cached is None:
                cached = await self._build_tasks(hosted, split)
                self._datasets[(hosted.key, split)] = cached
        return cached

    async def shown_tasks(
        self, hosted: HostedEnv, split: str, role: str | None
    ) -> list[dict[str, Any]]:
        """The tasks of a split as a client of ``role`` may see them (every task, for an
        env without roles): a task some of whose keys are hidden from it
        (``MultistepEnv.task_for_role``) is its shown part and :data:`TASK_REF_KEY`, which
        brings the whole task back when the client plays it (:meth:`whole_task`)."""
        tasks = await self.tasks(hosted, split)
        if role is None:
            return tasks
        shown = []
        for index, task in enumerate(tasks):
            seen = hosted.env.task_for_role(task, role)
            shown.append(seen if seen == task else {**seen, TASK_REF_KEY: f"{split}:{index}"})
        return shown

    async def whole_task(self, hosted: HostedEnv, task_data: dict[str, Any]) -> dict[str, Any]:
        """The task a client's ``task_data`` stands for: itself, or, when it carries
        :data:`TASK_REF_KEY` (a task shown in part), that row of the served split."""
        ref = task_data.get(TASK_REF_KEY)
        if ref is None:
            return task_data
        split, _, index = str(ref).partition(":")
        tasks = await self.tasks(hosted, split) if split in SPLITS else []
        if not index.isdigit() or int(index) >= len(tasks):
            raise NoTask(
                f"task_data {TASK_REF_KEY}={str(ref)[:80]!r} names no task of this server "
                f"(a split and a row: 'train:3'); play a task its datasets gave"
            )
        return tasks[int(index)]

    async def _build_tasks(self, hosted: HostedEnv, split: str) -> list[dict[str, Any]]:
        def build() -> list[dict[str, Any]]:
            rows = getattr(hosted.env, f"get_{split}_dataset")()
            return [dict(row["task_data"]) for row in rows]

        try:
            return await self.pool.run(build)
        except NotImplementedError:
            raise NoTask(
                f"{self.spec.id} ships no {split} dataset; give the task itself "
                "(task_data) through /agentsgym/v1"
            ) from None
        except Exception as exc:  # noqa: BLE001 (the env's own failure, reported)
            raise EnvFailure(
                f"building the {split} dataset failed: {type(exc).__name__}: {exc}"
            ) from None

    # ------------------------------------------------------------------ episodes
    def episode(
        self, hosted: HostedEnv, session_id: str, task_data: dict[str, Any], rollout_seed: int
    ) -> EpisodeSession:
        """A new episode of ``task_data`` on ``hosted`` (started by the caller), whose
        agents play the rollout of ``rollout_seed``."""
        return EpisodeSession(
            hosted.env, session_id, task_data, runtime=hosted.runtime, rollout_seed=rollout_seed
        )


def env_failure(play: EpisodeSession, exc: Exception) -> EnvFailure:
    """The env's failure on this request, naming where the episode was (a hook, the
    tools), as the client is told it."""
    return EnvFailure(f"{play.phase}: {type(exc).__name__}: {exc}")
