"""Who plays which env: ``--agent NAME`` (every env), ``--agent ENV_ID=NAME`` (one env
of a mixed rows file), else the env's ``default_agent``. ``--agent-option key=value``
goes to every agent that takes it, so one ``base_url=...`` serves every ``openai`` agent.
Agents are checked before any file is touched; a remote executor gets
:class:`~agentsgym.AgentSpec` recipes that each worker builds (never a live agent).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentsgym.cli.options import accepted_options, build_component, check_options, load_factory
from agentsgym.errors import AgentError
from agentsgym.executors import AgentSpec
from agentsgym.registry import get_registry

if TYPE_CHECKING:
    from agentsgym.env import MultistepEnv


@dataclass(frozen=True)
class AgentChoices:
    """``--agent`` values: one agent for every env, and/or one per env id."""

    default: str | None = None
    per_env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, values: Sequence[str] | str | None) -> AgentChoices:
        if isinstance(values, str):
            values = [values]
        default: str | None = None
        per_env: dict[str, str] = {}
        for value in values or []:
            env_id, sep, name = value.partition("=")
            if not sep:
                if default is not None and default != value:
                    raise AgentError(
                        f"--agent {default} and --agent {value}: give one agent for every env, "
                        "or one per env as --agent ENV_ID=AGENT"
                    )
                default = value.strip()
                continue
            env_id, name = env_id.strip(), name.strip()
            if not env_id or not name:
                raise AgentError(f"--agent must be NAME or ENV_ID=NAME, got {value!r}")
            if per_env.get(env_id, name) != name:
                raise AgentError(
                    f"--agent names two agents for {env_id}: {per_env[env_id]} and {name}"
                )
            per_env[env_id] = name
        return cls(default, per_env)

    def resolve(
        self, env_ids: Iterable[str], envs: Mapping[str, MultistepEnv] | None = None
    ) -> dict[str, str]:
        """The agent name of each env: its own, else the run's, else the env's default
        (its registration's, else what the built env in ``envs`` reports: a server's)."""
        env_ids = list(dict.fromkeys(env_ids))
        unknown = sorted(set(self.per_env) - set(env_ids))
        if unknown:
            raise AgentError(
                f"--agent names an agent for {', '.join(unknown)}, which this run does not "
                f"play (its envs: {', '.join(env_ids)})"
            )
        registry = get_registry()
        chosen: dict[str, str] = {}
        for env_id in env_ids:  # typed by the user, or rows whose envs were already allowed
            spec = registry.resolve(env_id, allow_class_paths=True, allow_remote=True)
            name = self.per_env.get(env_id) or self.default or spec.default_agent
            if name is None and envs is not None and env_id in envs:
                name = envs[env_id].default_agent
            if name is None:
                raise AgentError(
                    f"{env_id} registers no default agent; choose one with --agent AGENT, or "
                    f"--agent {env_id}=AGENT for this env only (see `agentsgym list-agents`)"
                )
            chosen[env_id] = name
        return chosen


def options_per_agent(names: Iterable[str], options: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each agent's share of ``--agent-option``. With one agent every option must be one
    it takes; with several, an option goes to each agent that takes it (at least one)."""
    names = list(dict.fromkeys(names))
    registry = get_registry()
    factories = {name: load_factory(registry.agent(name), "agent") for name in names}
    if len(names) == 1:
        name = names[0]
        check_options(factories[name], options, what=f"agent {name!r}")
        return {name: dict(options)}
    accepted = {name: accepted_options(factory) for name, factory in factories.items()}
    shares: dict[str, dict[str, Any]] = {name: {} for name in names}
    for key, value in options.items():
        takers = [n for n in names if accepted[n] is None or key in (accepted[n] or [])]
        if not takers:
            listed = "; ".join(f"{n}: {', '.join(accepted[n] or []) or 'none'}" for n in names)
            raise AgentError(
                f"no agent of this run takes the option {key!r}. They accept: {listed}"
            )
        for name in takers:
            shares[name][key] = value
    return shares


@dataclass
class RunAgents:
    """The agents of a run, by env id, as recipes (and built, for a local run)."""

    by_env: dict[str, str]
    options: dict[str, dict[str, Any]]
    built: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def choose(
        cls,
        choices: AgentChoices,
        env_ids: Iterable[str],
        options: dict[str, Any],
        *,
        build: bool,
        envs: Mapping[str, MultistepEnv] | None = None,
    ) -> RunAgents:
        by_env = choices.resolve(env_ids, envs)
        shares = options_per_agent(by_env.values(), options)
        agents = cls(by_env, shares)
        if build:
            agents.built = {n: build_component(get_registry().agent(n), shares[n]) for n in shares}
        return agents

    @property
    def single(self) -> str | None:
        """The one agent name when every env plays with the same agent."""
        names = set(self.by_env.values())
        return names.pop() if len(names) == 1 else None

    def players(self, *, remote: bool) -> dict[str, Any]:
        """Env id -> the built agent, or its recipe for an executor that plays elsewhere."""
        return {
            env_id: AgentSpec(name, self.options[name]) if remote else self.built[name]
            for env_id, name in self.by_env.items()
        }
