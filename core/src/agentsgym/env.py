"""MultistepEnv: the base class of every agentsgym environment."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from agentsgym import randomness
from agentsgym.aio import run_sync, sync_twin
from agentsgym.config import EnvConfig
from agentsgym.engine import DEFAULT_MAX_CONCURRENCY, EPISODE_HOOK_NAMES, aplay_episode, arun_trial
from agentsgym.errors import EnvConfigError, RunSettingsError
from agentsgym.hookspecs import PROJECT_NAME
from agentsgym.plugins import new_plugin_manager
from agentsgym.rows import rows_to_dataset
from agentsgym.tokenization import ChatTokenizer
from agentsgym.types import Role

if TYPE_CHECKING:
    import datasets

    from agentsgym.agents import Agent
    from agentsgym.specs import EnvSpec
    from agentsgym.trajectory import Episode, TrajectoryBatch


class MultistepEnv:
    """A multi-step text environment, played through the episode hooks.

    Subclasses implement ``initialize_episode``, ``format_prompt`` and ``step_episode``
    (optionally ``reward_shaping``, ``finish_episode``) as ``@hookimpl`` methods and set
    ``config_class`` to their :class:`EnvConfig` subclass. Tasks arrive in ``task_data``.

    :param tokenizer: a Hugging Face tokenizer with a chat template, or ``None`` to play
        without token fields (messages and rewards only).
    :param env_config: settings constant across tasks, validated by ``config_class``.
    :param plugins: extra plugins for this env's hook relay (step wrappers, reward terms).
    :param role_tokenizers: for an env with ``roles``, the tokenizer of a role whose model
        differs from the one of ``tokenizer`` (by role name): that role's token stream
        is rendered with its own chat template.
    """

    config_class: ClassVar[type[EnvConfig]] = EnvConfig
    roles: ClassVar[tuple[Role, ...]] = ()
    """The agents of an env with several (a game's seats); empty for a single-agent env.
    Such an env implements ``turn_role`` (whose turn it is) and takes ``role`` in its
    ``format_prompt``; each role plays with its own agent, conversation and token stream
    (docs/plugin-authors.md, "Several agents in one episode")."""
    run_hooks_inline: bool = False
    """``True`` when every hook computes for microseconds and never waits (board games):
    the runner then calls the turns on its event loop, sparing a worker thread's hop. A
    hook that waits (network, model, sleep) would stall every episode."""

    def __init__(
        self,
        tokenizer: Any = None,
        env_config: dict[str, Any] | None = None,
        *,
        plugins: Iterable[object] = (),
        role_tokenizers: dict[str, Any] | None = None,
    ) -> None:
        self.config = self.config_class.parse(env_config, env_name=type(self).__name__)
        self.env_config: dict[str, Any] = self.config.model_dump()
        self.tokenizer = tokenizer
        template_kwargs = self.config.chat_template_kwargs
        self.chat = ChatTokenizer(tokenizer, template_kwargs) if tokenizer is not None else None
        self.role_chats = {
            role: ChatTokenizer(role_tokenizer, template_kwargs)
            for role, role_tokenizer in check_role_names(self, role_tokenizers or {}).items()
        }
        """The chat tokenizer of each role whose model differs (others use ``chat``)."""
        self._trainable_roles = self._chosen_trainable_roles()
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

    @property
    def role_names(self) -> tuple[str, ...]:
        """The names of the declared roles, in declaration order (empty: one agent)."""
        return tuple(role.name for role in self.roles)

    @property
    def trainable_roles(self) -> tuple[str, ...]:
        """The roles whose episodes go into training batches: env_config
        ``trainable_roles``, else those declared ``trainable``."""
        return self._trainable_roles

    def _chosen_trainable_roles(self) -> tuple[str, ...]:
        chosen = self.config.trainable_roles
        if chosen is None:
            return tuple(r.name for r in self.roles if r.trainable)
        unknown = [name for name in chosen if name not in self.role_names]
        if unknown:
            declared = ", ".join(self.role_names) or "none: it plays with one agent"
            raise EnvConfigError(
                f"invalid env_config of {type(self).__name__}:\n  - trainable_roles: it has "
                f"no role {unknown[0]!r}; its roles are {declared}"
            )
        return tuple(dict.fromkeys(chosen))

    @property
    def default_agent(self) -> str | None:
        """The agent this env suggests when none is chosen: its registration's (an env
        on a server may report the server's)."""
        return self.spec.default_agent if self.spec is not None else None

    def _check_hook_markers(self) -> None:
        for name in EPISODE_HOOK_NAMES:
            method = getattr(type(self), name, None)
            if method is not None and not hasattr(method, f"{PROJECT_NAME}_impl"):
                raise TypeError(
                    f"{type(self).__name__}.{name} is not marked as a hook implementation; "
                    "decorate it with @agentsgym.hookimpl"
                )

    def episode_tools(self, task_data: dict[str, Any]) -> Any:
        """``None``, or the toolbox of an episode of ``task_data``: ``schemas`` for the chat
        template's ``tools=``; ``async respond(action)`` answers a reply's tool calls, ``None``
        if it made none. A ``respond`` that takes ``state=`` and ``session_id=`` is given,
        with every reply, the episode's current state and its session id: toolboxes of
        episodes of one task (one ``task_data`` object) are told apart by those, never by
        the task. A tool-env plugin builds one from plain functions. It may be ``async
        def`` (an env whose tools live elsewhere asks a server for them)."""
        return None

    # --------------------------------------------------------------- resources
    def close(self) -> None:
        """Release what the env holds open (connections to an env server, tool server
        processes). Nothing here; an env that holds resources overrides it. ``agentsgym
        rollout``, ``eval``, ``train`` and :func:`agentsgym.testing.check_env` call it when
        they are done with an env they built; it may be called more than once."""

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
        agent: Agent | dict[str, Agent] | None = None,
        num_rollouts: int = 1,
        *,
        max_concurrency: int | None = None,
        seed: int = 0,
        on_episode: Callable[[Episode], None] | None = None,
    ) -> TrajectoryBatch:
        """Play ``num_rollouts`` trials per task, up to ``max_concurrency`` at once, and pad
        each task's group. Agents' per-rollout seeds derive from ``seed``; ``on_episode``
        is called after every finished episode (progress bars). In an env with ``roles``,
        ``agent`` is a dict of agents by role, or one agent for every role (self-play);
        the batch holds one group per task and trainable role. Only an env that plays its
        own episodes with a model it names (a harness env with ``backend_url``) is played
        without an ``agent``."""
        max_concurrency = max_concurrency or DEFAULT_MAX_CONCURRENCY
        return await arun_trial(
            self,
            task_data_list,
            agent,
            num_rollouts,
            max_concurrency=max_concurrency,
            seed=seed,
            on_episode=on_episode,
        )

    run_trial = sync_twin(arun_trial)

    # --------------------------------------------------------------- randomness
    # The helpers of agentsgym.randomness, at hand in hooks: episodes of one env run
    # concurrently, so each draws from a generator of its own, seeded from its task.
    task_seed = staticmethod(randomness.task_seed)
    episode_random = staticmethod(randomness.episode_random)
    episode_numpy_rng = staticmethod(randomness.episode_numpy_rng)
    global_random = staticmethod(randomness.global_random)

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

    def task_for_role(self, task_data: dict[str, Any], role: str) -> dict[str, Any]:
        """What of a task a player of ``role`` may be shown: ``task_data`` without the keys
        other roles declare ``private`` (``Role.private``) and ``role`` does not (two roles
        may share a secret). ``agentsgym serve`` sends a client of a role only this; the
        env's hooks always get the whole task. Override it for secrets deeper than a
        top-level key (return a new dict; never change ``task_data``)."""
        own = {key for r in self.roles if r.name == role for key in r.private}
        hidden = {key for r in self.roles for key in r.private} - own
        return {key: value for key, value in task_data.items() if key not in hidden}

    def row_env_config(self) -> dict[str, Any]:
        """The env_config written into dataset rows: every key, defaults included, so a
        dataset keeps its meaning when a package changes its defaults. Rows are shared:
        override this to leave out secrets (API keys belong in the environment)."""
        return self.config.model_dump(mode="json")


def check_role_names(env: MultistepEnv, by_role: dict[str, Any]) -> dict[str, Any]:
    """``by_role`` unchanged, once every key is one of the env's declared roles."""
    unknown = [name for name in by_role if name not in env.role_names]
    if unknown:
        declared = ", ".join(env.role_names) or "none: it plays with one agent"
        raise RunSettingsError(
            f"{type(env).__name__} has no role {unknown[0]!r}; its roles are {declared}"
        )
    return by_role
