"""The server's agents of an env with roles: a client plays one role, they play the rest.

An env that declares roles (a game's seats) is served only with agents for the roles
its clients do not play (``agentsgym serve ENV --agent o=NAME``, or ``--agent NAME``
for every role a client does not play). A session plays one role, its *client role*:
the one the client named (agentsgym/v1's ``role`` on create or reset, OpenEnv's reset
``role``), else the server's default (``--client-role``, else the env's first
trainable role that the server can serve). After the client's step, and at the
start of an episode, the engine plays the other roles' turns with the server's agents
(:meth:`RoleAgents.players`, for :func:`agentsgym.runtime.play_until`) until it is the
client's turn again or the episode ends. The client sees only its role's view (its
conversation) and its role's rewards.

The server's agents play each rollout as a local run's agents do: seeded with the
client's rollout seed (``EpisodeContext.seed``, sent with the reset: agentsgym/v1's and
AgentGym's ``rollout_seed``, OpenEnv's reset ``rollout_seed``), so that the rollouts of a
task are different games. A client that sends none gets the next rollout of the task on
this server: its episodes of a task count 0, 1, 2..., each seeded as a local run (run
seed 0) seeds that rollout (:meth:`RoleAgents.rollout`).

A role the server can serve is one whose every other role has an agent here; a
server that can serve none is refused at start-up, saying what to pass. On the
command line a role given no agent plays with its ``Role.default_agent``, as in
``agentsgym rollout`` (:func:`with_role_defaults`); ``create_app`` takes the agents
it is given.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentsgym import EpisodeContext
from agentsgym.errors import RunSettingsError
from agentsgym.runtime import AgentCaller, Players, rollout_seed
from agentsgym_serve.errors import BadRole

if TYPE_CHECKING:
    from agentsgym import MultistepEnv

COUNTED_TASKS = 65_536
"""The tasks whose rollouts a server counts for clients that send no seed (the oldest
counted are forgotten past it)."""


@dataclass(frozen=True)
class RoleAgent:
    """One of the server's agents (how the engine calls it), and its name for the
    env's info."""

    caller: AgentCaller
    label: str


class RoleAgents:
    """The server's agents of an env's roles (see the module docstring).

    :param env: the served env (its roles and trainable roles).
    :param env_id: the served id (the agents' context names it).
    :param agents: agents by role; the key ``None`` plays every role a client does not.
    :param client_role: the role a session plays unless it names one.
    """

    def __init__(
        self,
        env: MultistepEnv,
        env_id: str,
        agents: Mapping[str | None, tuple[Any, str]],
        client_role: str | None = None,
    ) -> None:
        self.env_id = env_id
        self.roles = env.role_names
        unknown = [role for role in agents if role is not None and role not in self.roles]
        if unknown:
            raise RunSettingsError(
                f"--agent {unknown[0]}=...: {env_id} has no role {unknown[0]!r} (its roles: "
                f"{', '.join(self.roles)})"
            )
        every = agents.get(None)
        self.agents: dict[str, RoleAgent] = {}
        for role in self.roles:
            chosen = agents.get(role, every)
            if chosen is not None:
                self.agents[role] = RoleAgent(AgentCaller(chosen[0]), chosen[1])
        self.client_roles = tuple(
            role for role in self.roles if all(r in self.agents for r in self.roles if r != role)
        )
        if not self.client_roles:
            raise RunSettingsError(self._what_to_pass())
        self.fixed_role = client_role
        self._rollouts: OrderedDict[str, int] = OrderedDict()
        if client_role is not None:
            try:
                self.check(client_role)
            except BadRole as exc:
                raise RunSettingsError(f"--client-role {client_role}: {exc.detail}") from None

    @classmethod
    def for_env(
        cls,
        env: MultistepEnv,
        env_id: str,
        agents: Mapping[str | None, tuple[Any, str]],
        client_role: str | None = None,
    ) -> RoleAgents | None:
        """The agents of an env with roles; ``None`` for an env without (which takes
        neither agents nor a client role)."""
        if env.roles:
            return cls(env, env_id, agents, client_role)
        if agents or client_role is not None:
            given = "--client-role" if client_role is not None else "--agent"
            raise RunSettingsError(
                f"{env_id} has no roles: a client plays all of it, and the server plays none "
                f"of it; leave out {given}"
            )
        return None

    def _what_to_pass(self) -> str:
        first, others = self.roles[0], self.roles[1:]
        example = " ".join(f"--agent {role}=AGENT" for role in others)
        return (
            f"{self.env_id} has the roles {', '.join(self.roles)}: a client plays one of them "
            "and the server's agents play the others, but no role can be served with the "
            f"agents given. Start the server with agents for the roles clients do not play: "
            f"{example} (clients play {first}), or --agent AGENT for every role a client does "
            "not play (see `agentsgym list-agents`)"
        )

    # ------------------------------------------------------------------ a session's role
    def default_role(self, env: MultistepEnv) -> str:
        """The role of a session that names none: ``--client-role``, else the first
        trainable role (of this config's env) the server can serve."""
        if self.fixed_role is not None:
            return self.fixed_role
        trainable = [r for r in env.trainable_roles if r in self.client_roles]
        return trainable[0] if trainable else self.client_roles[0]

    def check(self, role: str) -> str:
        """``role``, once a client may play it here (BadRole otherwise)."""
        if role not in self.roles:
            raise BadRole(
                f"{self.env_id} has no role {role!r}; its roles: {', '.join(self.roles)}",
                roles=list(self.roles),
            )
        if role not in self.client_roles:
            missing = [r for r in self.roles if r != role and r not in self.agents]
            raise BadRole(
                f"this server cannot let a client play {role!r}: it has no agent for "
                f"{', '.join(missing)}; play {' or '.join(self.client_roles)}",
                roles=list(self.client_roles),
            )
        return role

    def role_of(self, env: MultistepEnv, asked: str | None) -> str:
        """The role a session plays: the one asked for (checked), else the default."""
        return self.default_role(env) if asked is None else self.check(asked)

    def info(self) -> dict[str, Any]:
        """What ``GET /agentsgym/v1/env`` says of the roles."""
        return {
            "roles": list(self.roles),
            "client_roles": list(self.client_roles),
            "default_role": self.fixed_role,
            "role_agents": {role: agent.label for role, agent in self.agents.items()},
        }

    # ------------------------------------------------------------------ playing
    def rollout(
        self, config_key: str, task_data: dict[str, Any], seed: int | None
    ) -> tuple[int, int]:
        """The rollout index and seed the server's agents play an episode with: the seed
        the client sent (its rollout's), else the next rollout of this task on this server
        (its episodes of the task count 0, 1, 2...), seeded as a local run (run seed 0)
        seeds that rollout."""
        if seed is not None:
            return 0, seed
        key = json.dumps([config_key, task_data], sort_keys=True, default=str)
        index = self._rollouts.pop(key, 0)
        self._rollouts[key] = index + 1
        while len(self._rollouts) > COUNTED_TASKS:
            self._rollouts.popitem(last=False)
        return index, rollout_seed(0, self.env_id, task_data, index)

    def players(
        self,
        session_id: str,
        states: dict[str | None, Any],
        episode_index: int,
        rollout: tuple[int, int],
    ) -> Players:
        """The server's agents of an episode, for the engine to play the roles its client
        does not. ``states``: each role's agent state (kept across a session's episodes).
        ``rollout``: the rollout index and seed of their context (:meth:`rollout`): with
        the client's seed, a seeded scripted opponent moves here as it would in
        `agentsgym rollout` against the same task and rollout."""
        index, seed = rollout
        context = EpisodeContext(session_id, self.env_id, 0, index, episode_index, seed)
        callers = {role: agent.caller for role, agent in self.agents.items()}
        for role in callers:
            states.setdefault(role, None)
        return Players(callers, states, context, "the server's agent")


def with_role_defaults(
    agents: Mapping[str | None, Any], env: MultistepEnv
) -> dict[str | None, Any]:
    """``agents`` with each role's ``Role.default_agent`` for the roles given none, as
    the command line chooses them (``agentsgym rollout``): only when no agent of every
    role (the key ``None``, ``--agent NAME``) is given."""
    chosen = dict(agents)
    if None in chosen:
        return chosen
    for role in env.roles:
        if role.name not in chosen and role.default_agent is not None:
            chosen[role.name] = role.default_agent
    return chosen


def build_role_agents(
    agents: Mapping[str | None, Any], options: Mapping[str, Any], roles: tuple[str, ...]
) -> dict[str | None, tuple[Any, str]]:
    """The server's agents, built: a value of ``agents`` is an agent, or a registered
    agent's name (built with its options, as ``agentsgym rollout`` builds them:
    ``ROLE.key`` goes to that role's agent, a plain ``key`` to the agent of every role,
    the key ``None``); each with its label (its name, or its class's)."""
    if not agents and not options:
        return {}
    from agentsgym.cli import build_component, split_role_options
    from agentsgym.runtime import get_registry

    shared, by_role = split_role_options(options, roles)
    unused = [f"{role}.*" for role in by_role if not isinstance(agents.get(role), str)]
    if shared and not isinstance(agents.get(None), str):
        unused.append(", ".join(shared))
    if unused:
        raise RunSettingsError(
            f"--agent-option {unused[0]}: no agent of this server takes it (a plain key goes "
            "to the agent of every role, --agent NAME; ROLE.key to --agent ROLE=NAME)"
        )
    built: dict[str | None, tuple[Any, str]] = {}
    for role, agent in agents.items():
        if isinstance(agent, str):
            given = shared if role is None else by_role.get(role, {})
            built[role] = (build_component(get_registry().agent(agent), given), agent)
        else:
            built[role] = (agent, type(agent).__name__)
    return built
