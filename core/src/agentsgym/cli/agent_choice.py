"""Who plays which env: ``--agent NAME`` (every env), ``--agent ENV_ID=NAME`` (one env
of a mixed rows file), else the env's ``default_agent``. ``--agent-option key=value``
goes to every agent that takes it, so one ``base_url=...`` serves every ``openai`` agent.
In an env with roles, ``--agent ROLE=NAME`` chooses one role's agent (a role name has
no ``/`` or ``:``, an env id or class path has) and ``--agent-option ROLE.key=value``
gives that agent an option; a role the command line names no agent for plays with its
``Role.default_agent`` when the env declares one and no ``--agent NAME`` or
``--agent ENV_ID=NAME`` names the env's, else with the env's agent (self-play when no
role has its own).
Agents are checked before any file is touched; a remote executor gets
:class:`~agentsgym.runtime.AgentSpec` recipes that each worker builds (never a live agent).
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
    per_role: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, values: Sequence[str] | str | None) -> AgentChoices:
        if isinstance(values, str):
            values = [values]
        default: str | None = None
        per_env: dict[str, str] = {}
        per_role: dict[str, str] = {}
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
                raise AgentError(f"--agent must be NAME, ENV_ID=NAME or ROLE=NAME, got {value!r}")
            if is_role_name(env_id):
                if per_role.get(env_id, name) != name:
                    raise AgentError(
                        f"--agent names two agents for role {env_id}: {per_role[env_id]} and {name}"
                    )
                per_role[env_id] = name
                continue
            if per_env.get(env_id, name) != name:
                raise AgentError(
                    f"--agent names two agents for {env_id}: {per_env[env_id]} and {name}"
                )
            per_env[env_id] = name
        return cls(default, per_env, per_role)

    def role_agents(self, envs: Mapping[str, MultistepEnv]) -> dict[str, str]:
        """The agent of each role that has its own: the one ``--agent ROLE=NAME`` names
        (every role named must be one of the envs' roles), else the role's
        ``default_agent`` in an env whose agent the command line does not name (with
        ``--agent NAME`` or ``--agent ENV_ID=NAME`` one agent plays every role)."""
        roles = {role for env in envs.values() for role in env.role_names}
        unknown = sorted(set(self.per_role) - roles)
        if unknown:
            known = ", ".join(sorted(roles)) or "none (no env of this run has roles)"
            raise AgentError(
                f"--agent {unknown[0]}={self.per_role[unknown[0]]}: no env of this run has the "
                f"role {unknown[0]!r} (its roles: {known}); an env id has a '/' "
                "(--agent ENV_ID=NAME)"
            )
        chosen = dict(self.per_role)
        defaults: dict[str, tuple[str, str]] = {}  # role -> (agent, the env that declares it)
        registered = get_registry().agents
        for env_id, env in envs.items():
            if self.default is not None or env_id in self.per_env:
                continue
            for role in env.roles:
                if role.default_agent is None or role.name in chosen:
                    continue
                if role.default_agent not in registered:
                    raise AgentError(
                        f"the role {role.name!r} of {env_id} defaults to the agent "
                        f"{role.default_agent!r}, which is not registered (is the plugin that "
                        f"registers it installed? see `agentsgym list-agents`); choose its "
                        f"agent with --agent {role.name}=AGENT"
                    )
                agent, declared_by = defaults.setdefault(role.name, (role.default_agent, env_id))
                if agent != role.default_agent:
                    raise AgentError(
                        f"the role {role.name!r} defaults to {agent} in {declared_by} and to "
                        f"{role.default_agent} in {env_id}; choose its agent with "
                        f"--agent {role.name}=AGENT"
                    )
        return {**chosen, **{role: agent for role, (agent, _) in defaults.items()}}

    def resolve(
        self,
        env_ids: Iterable[str],
        envs: Mapping[str, MultistepEnv] | None = None,
        role_agents: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """The agent name of each env: its own, else the run's, else the env's default
        (its registration's, else what the built env in ``envs`` reports: a server's).
        An env of ``envs`` whose every role has its own agent in ``role_agents`` (from
        :meth:`role_agents`) needs none, and is left out when it has none."""
        env_ids = list(dict.fromkeys(env_ids))
        role_agents = role_agents or {}
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
            roles: tuple[str, ...] = ()
            if name is None and envs is not None and env_id in envs:
                name = envs[env_id].default_agent
                roles = envs[env_id].role_names
                if name is None and roles and all(role in role_agents for role in roles):
                    continue  # each role plays with its own agent
            if name is None:
                raise AgentError(_no_agent(env_id, [r for r in roles if r not in role_agents]))
            chosen[env_id] = name
        return chosen


def _no_agent(env_id: str, roles_without: Sequence[str]) -> str:
    """What to give when ``env_id`` has no agent: in an env with roles, the roles that
    have none of their own (no ``--agent ROLE=NAME``, no ``Role.default_agent``)."""
    if not roles_without:
        return (
            f"{env_id} registers no default agent; choose one with --agent AGENT, or "
            f"--agent {env_id}=AGENT for this env only (see `agentsgym list-agents`)"
        )
    named = ", ".join(repr(role) for role in roles_without)
    flags = " ".join(f"--agent {role}=AGENT" for role in roles_without)
    return (
        f"{env_id} registers no default agent, and its role{'s' if len(roles_without) > 1 else ''} "
        f"{named} declare{'' if len(roles_without) > 1 else 's'} none: give {flags}, or one "
        "agent for every role with --agent AGENT (see `agentsgym list-agents`)"
    )


def is_role_name(key: str) -> bool:
    """``--agent KEY=NAME``: a role's name has no '/' or ':' (env ids and class paths do)."""
    return "/" not in key and ":" not in key


def split_role_options(
    options: Mapping[str, Any], roles: Iterable[str]
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``--agent-option`` split into the run's options and each role's: ``ROLE.key`` of
    one of ``roles`` goes to that role's agent, any other key to the run's."""
    roles = set(roles)
    shared: dict[str, Any] = {}
    by_role: dict[str, dict[str, Any]] = {}
    for key, value in options.items():
        role, dot, name = key.partition(".")
        if dot and role in roles:
            by_role.setdefault(role, {})[name] = value
        else:
            shared[key] = value
    return shared, by_role


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
                f"no agent of this run takes the option {key!r}. They accept: "
                f"{listed or 'none (every role has its own agent)'}; the agent of a role "
                "takes ROLE.key=value"
            )
        for name in takers:
            shares[name][key] = value
    return shares


@dataclass
class RunAgents:
    """The agents of a run, by env id, as recipes (and built, for a local run)."""

    by_env: dict[str, str]
    """The agent of each env that needs one (an env whose every role has its own has
    none)."""
    options: dict[str, dict[str, Any]]
    built: dict[str, Any] = field(default_factory=dict)
    by_role: dict[str, str] = field(default_factory=dict)
    """The agent of each role that has its own (``--agent ROLE=NAME``)."""
    role_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    built_roles: dict[str, Any] = field(default_factory=dict)
    env_roles: dict[str, tuple[str, ...]] = field(default_factory=dict)

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
        by_role = choices.role_agents(envs or {})
        by_env = choices.resolve(env_ids, envs, by_role)
        options, per_role_options = split_role_options(options, by_role)
        shares = options_per_agent(by_env.values(), options)
        agents = cls(by_env, shares, by_role=by_role, role_options=per_role_options)
        agents.env_roles = {env_id: env.role_names for env_id, env in (envs or {}).items()}
        registry = get_registry()
        for role, name in by_role.items():
            check_options(
                load_factory(registry.agent(name), "agent"),
                per_role_options.get(role, {}),
                what=f"agent {name!r} of role {role!r}",
            )
        if build:
            agents.built = {n: build_component(registry.agent(n), shares[n]) for n in shares}
            agents.built_roles = {
                role: build_component(registry.agent(name), per_role_options.get(role, {}))
                for role, name in by_role.items()
            }
        return agents

    @property
    def single(self) -> str | None:
        """The one agent name when every env plays with the same agent."""
        names = set(self.by_env.values())
        return names.pop() if len(names) == 1 else None

    def players(self, *, remote: bool) -> dict[str, Any]:
        """Env id -> the built agent, or its recipe for an executor that plays elsewhere;
        for an env with roles of their own agents, a dict of them by role."""
        players: dict[str, Any] = {}
        for env_id in dict.fromkeys([*self.by_env, *self.env_roles]):
            name = self.by_env.get(env_id)
            player = None
            if name is not None:
                player = AgentSpec(name, self.options[name]) if remote else self.built[name]
            roles = self.env_roles.get(env_id, ())
            if roles and any(role in self.by_role for role in roles):
                player = {role: self._role_player(role, player, remote) for role in roles}
            players[env_id] = player
        return players

    def _role_player(self, role: str, env_player: Any, remote: bool) -> Any:
        if role not in self.by_role:
            return env_player
        if remote:
            return AgentSpec(self.by_role[role], self.role_options.get(role, {}))
        return self.built_roles[role]
