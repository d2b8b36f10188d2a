"""Executors: where the trials of a run are played.

An executor plays an :class:`ExecutionRequest`, calling ``on_episode`` / ``on_trial`` in
this process as trials finish, so a run gives the same output whichever executor played.
The core registers ``local`` (:class:`LocalExecutor`); plugins add others. A remote
executor builds agents in its workers from :class:`AgentSpec` recipes, since a live
agent (its clients, threads or model) cannot be pickled and shipped.

This module is public for executor authors (docs/plugin-authors.md): a worker that plays
its share of a request builds :class:`TrialJob` s and plays them with :func:`arun_jobs`,
as :class:`LocalExecutor` does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentsgym.engine import (
    DEFAULT_MAX_CONCURRENCY,
    EpisodeCallback,
    TrialCallback,
    TrialJob,
    arun_jobs,
)
from agentsgym.errors import AgentError, RunSettingsError
from agentsgym.factory import load_tokenizer, make
from agentsgym.registry import get_registry, make_agent
from agentsgym.rows import DatasetRow
from agentsgym.specs import accepted_options

if TYPE_CHECKING:
    from agentsgym.env import MultistepEnv
    from agentsgym.trajectory import Episode

__all__ = [
    "AgentSpec",
    "EpisodeCallback",
    "ExecutionRequest",
    "Executor",
    "LocalExecutor",
    "TrialCallback",
    "TrialJob",
    "arun_jobs",
    "as_agent_spec",
    "build_envs",
    "built_agent",
    "make_executor",
    "options_taken",
]

Results = dict[tuple[int, int], "list[Episode]"]


# ------------------------------------------------------------------------ agents
@dataclass(frozen=True)
class AgentSpec:
    """A registered agent name or a picklable factory, and the options to call it with.

    ``AgentSpec("openai", {"base_url": "http://gpu-node:8000/v1", "api": "completions"})``
    """

    factory: str | Callable[..., Any]
    options: Mapping[str, Any] = field(default_factory=dict)

    def build(self) -> Any:
        if isinstance(self.factory, str):
            return make_agent(self.factory, **dict(self.options))
        return self.factory(**dict(self.options))


def role_agents(by_role: Mapping[str | None, AgentSpec]) -> dict[str | None, Any]:
    """The agents of an env's roles, built from their recipes: the factory of the
    AgentSpec that :func:`as_agent_spec` makes of a dict of agents by role."""
    return {role: spec.build() for role, spec in by_role.items()}


def as_agent_spec(agent: Any, options: Mapping[str, Any] | None = None) -> AgentSpec:
    """An AgentSpec from a spec, a registered name, or a factory; an agent object is refused.
    A dict of them by role (an env with roles) becomes one spec that builds that dict."""
    if isinstance(agent, AgentSpec):
        return agent
    if isinstance(agent, dict):
        by_role = {role: as_agent_spec(one) for role, one in agent.items()}
        return AgentSpec(role_agents, {"by_role": by_role})
    if isinstance(agent, str) or (callable(agent) and not hasattr(agent, "get_action")):
        return AgentSpec(agent, dict(options or {}))
    raise AgentError(
        f"this executor builds the agent in each worker, so it needs a recipe, not the agent "
        f"object {type(agent).__name__} (its clients and threads cannot be shipped): pass "
        "agent='<registered name>' (with agent_options=...) or "
        "agentsgym.runtime.AgentSpec(factory, {option: value})"
    )


def built_agent(agent: Any) -> Any:
    """An agent object from an agent, a registered name or an AgentSpec (None stays None);
    a dict of them by role, the dict of the built agents."""
    if isinstance(agent, dict):
        return {role: built_agent(one) for role, one in agent.items()}
    if isinstance(agent, (AgentSpec, str)):
        return as_agent_spec(agent).build()
    return agent


# -------------------------------------------------------------------------- envs
def build_envs(
    rows: Sequence[DatasetRow],
    *,
    tokenizer: Any = None,
    allow_class_paths: bool | Sequence[str] | None = None,
    envs: dict[tuple[str, str], MultistepEnv] | None = None,
    allow_remote: bool | Sequence[str] | None = None,
) -> dict[tuple[str, str], MultistepEnv]:
    """One env per distinct :meth:`DatasetRow.env_key`, built before any episode plays
    (so an unknown id or a bad config fails fast), reusing those already in ``envs``."""
    envs = {} if envs is None else envs
    missing = [row for row in rows if row.env_key() not in envs]
    loaded = load_tokenizer(tokenizer) if missing else None  # only when an env is built
    for row in missing:
        if row.env_key() not in envs:  # rows may share an env
            envs[row.env_key()] = make(
                row.env_class_path,
                tokenizer=loaded,
                env_config=row.env_config,
                allow_class_paths=allow_class_paths,
                allow_remote=allow_remote,
            )
    return envs


# ------------------------------------------------------------------ the protocol
@dataclass
class ExecutionRequest:
    """The trials of a run (``keys``: ``(task_index, rollout_index)``; row ``i`` is task
    ``i``), and everything needed to play them here or elsewhere. ``envs`` are built in
    this process and stand for the rows' envs in the callbacks. ``agent`` plays the rows
    whose env id has no agent in ``agents``: objects in process, :class:`AgentSpec`
    recipes (or registered names) for a remote executor."""

    rows: Sequence[DatasetRow]
    keys: Sequence[tuple[int, int]]
    envs: Mapping[tuple[str, str], MultistepEnv]
    agent: Any = None
    agents: Mapping[str, Any] = field(default_factory=dict)
    num_rollouts: int = 1
    tokenizer: Any = None
    allow_class_paths: bool | Sequence[str] | None = None
    allow_remote: bool | Sequence[str] | None = None
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    seed: int = 0

    def job(self, task_index: int, rollout_index: int, agent: Any = None) -> TrialJob:
        """The trial ``(task_index, rollout_index)``, on this process's env instance."""
        row = self.rows[task_index]
        return TrialJob(self.envs[row.env_key()], row.task_data, task_index, rollout_index, agent)

    def agent_specs(self) -> tuple[AgentSpec | None, dict[str, AgentSpec]]:
        """The agents as recipes, for executors that build them in their workers."""
        default = None if self.agent is None else as_agent_spec(self.agent)
        return default, {k: as_agent_spec(v) for k, v in self.agents.items()}

    def built_agents(self) -> tuple[Any, dict[str, Any]]:
        """The agents as objects, built here from recipes where needed."""
        return built_agent(self.agent), {k: built_agent(v) for k, v in self.agents.items()}


@runtime_checkable
class Executor(Protocol):
    """Plays the trials of an :class:`ExecutionRequest`."""

    remote: bool
    """Trials run in other processes: agents must be :class:`AgentSpec` recipes."""

    async def arun(
        self,
        request: ExecutionRequest,
        *,
        on_episode: EpisodeCallback | None = None,
        on_trial: TrialCallback | None = None,
    ) -> Results:
        """Play ``request.keys``; episodes by key. The callbacks are called in this
        process as trials finish, with jobs from :meth:`ExecutionRequest.job`."""
        ...


def make_executor(name: str, **options: Any) -> Executor:
    """Build the executor registered as ``name`` with its options (``num_workers``...);
    an option it does not take is a RunSettingsError listing the ones it does."""
    factory = get_registry().executor(name).load()
    accepted = accepted_options(factory)
    unknown = [] if accepted is None else sorted(set(options) - set(accepted))
    if unknown:
        raise RunSettingsError(
            f"executor {name!r} has no option {', '.join(map(repr, unknown))}; it takes: "
            f"{', '.join(accepted or []) or 'none'}"
        )
    return factory(**options)


def options_taken(name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The ``options`` that the executor registered as ``name`` takes."""
    accepted = accepted_options(get_registry().executor(name).load())
    return {k: v for k, v in options.items() if accepted is None or k in accepted}


class LocalExecutor:
    """The default executor: trials as asyncio tasks in this process."""

    remote = False

    async def arun(
        self,
        request: ExecutionRequest,
        *,
        on_episode: EpisodeCallback | None = None,
        on_trial: TrialCallback | None = None,
    ) -> Results:
        default, per_env = request.built_agents()
        jobs = [
            request.job(i, r, per_env.get(request.rows[i].env_class_path, default))
            for i, r in request.keys
        ]
        return await arun_jobs(
            jobs,
            None,
            max_concurrency=request.max_concurrency,
            seed=request.seed,
            on_episode=on_episode,
            on_trial=on_trial,
        )
