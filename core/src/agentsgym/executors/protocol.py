"""The Executor protocol and the request every executor is given."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentsgym.engine import DEFAULT_MAX_CONCURRENCY, TrialJob
from agentsgym.errors import RunSettingsError
from agentsgym.executors.agent_spec import AgentSpec, as_agent_spec, built_agent
from agentsgym.registry import get_registry
from agentsgym.rows import DatasetRow

if TYPE_CHECKING:
    from agentsgym.engine import EpisodeCallback, TrialCallback
    from agentsgym.env import MultistepEnv
    from agentsgym.trajectory import Episode

Results = dict[tuple[int, int], "list[Episode]"]


@dataclass
class ExecutionRequest:
    """The trials of a run, and everything needed to play them here or elsewhere.

    Row ``i`` is task ``i``; ``keys`` are the ``(task_index, rollout_index)`` trials
    to play. ``envs`` are built in this process (by :meth:`DatasetRow.env_key`) and
    stand for the rows' envs in the callbacks; ``agent`` plays the rows whose env has
    no agent in ``agents`` (by env id). Agents are objects for an in-process executor
    and :class:`AgentSpec` recipes (or registered names) for a remote one; the rest
    is what a worker needs to build the same envs.
    """

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

    def agent_of(self, env_class_path: str) -> Any:
        """Who plays the rows of ``env_class_path`` (as given: object, spec or name)."""
        agent = self.agents.get(env_class_path, self.agent)
        if agent is None:
            raise RunSettingsError(
                f"no agent for the rows of {env_class_path}: give agent= for every env, or "
                "agents={env_id: agent} for each of them"
            )
        return agent

    def job(self, task_index: int, rollout_index: int, agent: Any = None) -> TrialJob:
        """The trial ``(task_index, rollout_index)``, on this process's env instance."""
        row = self.rows[task_index]
        return TrialJob(
            self.envs[row.env_key()], row.task_data, task_index, rollout_index, agent
        )

    def agent_specs(self) -> tuple[AgentSpec | None, dict[str, AgentSpec]]:
        """The agents as recipes, for executors that build them in their workers."""
        default = None if self.agent is None else as_agent_spec(self.agent)
        return default, {k: as_agent_spec(v) for k, v in self.agents.items()}

    def built_agents(self) -> tuple[Any, dict[str, Any]]:
        """The agents as objects, built here from recipes where needed."""
        return built_agent(self.agent), {k: built_agent(v) for k, v in self.agents.items()}


@runtime_checkable
class Executor(Protocol):
    """Plays the trials of an :class:`ExecutionRequest` (see :mod:`agentsgym.executors`)."""

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
    """Build the executor registered as ``name`` with its options (``num_workers``...)."""
    return get_registry().executor(name).build(**options)
