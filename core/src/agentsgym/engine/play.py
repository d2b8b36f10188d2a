"""Driving agents: the engine plays an episode's turns with agents.

Every producer that has agents drives an :class:`EpisodeSession` through
:func:`play_until`: the local engine plays every role to the end
(:mod:`agentsgym.engine.episode`); ``agentsgym serve`` plays the roles its client does
not, until it is the client's turn again (:func:`play_turn`). Who plays each role is
:class:`Players`: an agent caller and its state per role, and the episode's context.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentsgym.agents import AgentCaller
from agentsgym.engine.outcomes import TurnOutcome
from agentsgym.errors import EpisodeError, RunSettingsError
from agentsgym.types import AgentAction, EpisodeContext

if TYPE_CHECKING:
    from agentsgym.engine.playable import PlayableEnv
    from agentsgym.engine.session import EpisodeSession


@dataclass(slots=True)
class Players:
    """Who plays an episode's roles: a caller per role (``None``: the only agent of an
    env without roles), each role's agent state (a key for every caller; kept and
    updated here), the episode's context (its step, tools and role are filled in at
    each turn), and what the episode's messages call them (``"the server's agent"``)."""

    callers: dict[str | None, AgentCaller]
    states: dict[str | None, Any]
    context: EpisodeContext
    name: str = "the agent"

    @property
    def token_in(self) -> frozenset[str | None]:
        """The roles whose agents answer their view's own prompt ids."""
        return frozenset(role for role, caller in self.callers.items() if caller.token_in)

    def context_of(self, session: EpisodeSession, role: str | None) -> EpisodeContext:
        c = self.context
        return EpisodeContext(
            c.session_id,
            c.env_id,
            c.task_index,
            c.rollout_index,
            c.episode_index,
            c.seed,
            session.steps_taken,
            session.tools,
            role,
        )


async def play_until(
    session: EpisodeSession, players: Players, *, until: str | None = None
) -> None:
    """Play the turns of the players' roles until the episode is over, or (``until``)
    until it is that role's turn: its driver plays it (a server's client). A failure of
    an agent is recorded on the episode and raised, as the session's own failures are."""
    views = session.recorder.views
    while not session.over and (until is None or session.role != until):
        role = session.role
        try:
            caller = players.callers[role]
        except KeyError:
            raise EpisodeError(
                f"episode {session.session_id}: it is {role!r}'s turn, and no agent plays it"
            ) from None
        session.phase = players.name if role is None else f"{players.name} of role {role!r}"
        view = views[role]
        try:
            action, players.states[role] = await caller.act(
                view.episode.messages,
                players.states[role],
                prompt_token_ids=view.prompt_token_ids() if caller.token_in else None,
                context=players.context_of(session, role) if caller.takes_context else None,
                pool=session.runtime.pool,
            )
        except Exception as exc:
            session.fail(exc)
            raise
        await session.step(action, role=role)


async def play_turn(
    session: EpisodeSession, action: AgentAction, role: str | None, players: Players
) -> TurnOutcome:
    """``role``'s action (its driver's), then the players' turns until it is ``role``'s
    turn again or the episode is over: the outcome as ``role`` sees it (its step's reward
    and terms, its new messages, whether the episode ended on any role's step). Without
    roles (``role`` ``None``) the step's own outcome."""
    if not session.roles:
        return await session.step(action, role=role)
    messages = session.view(role).messages
    seen = len(messages) + 1  # the action's reply is the next message
    acted = await session.step(action, role=role)
    await play_until(session, players, until=role)
    return TurnOutcome(
        reward=acted.reward,
        terms=acted.terms,
        done=session.done,
        truncated=session.truncated and not session.done,
        info=acted.info,
        messages=messages[seen:],
        tool_results=acted.tool_results,
        record=acted.record,
        role=role,
    )


def callers_by_role(caller: Any, roles: tuple[str, ...], env: PlayableEnv) -> dict[str | None, Any]:
    """Who plays each role (``None``: the only agent of an env without roles): ``caller``
    is one agent or caller, or a dict of them by role, where the key ``None`` plays every
    role without its own (a policy against fixed opponents: ``{None: policy, "o":
    opponent}``); RunSettingsError unless every role has one."""
    if not isinstance(caller, dict):
        return {role: caller for role in roles} if roles else {None: caller}
    if None in caller:  # the agent of every role not named
        others = {role: one for role, one in caller.items() if role is not None}
        if not roles:
            return {None: caller[None]}
        caller = {**dict.fromkeys(roles, caller[None]), **others}
    name = type(env).__name__
    if not roles:
        raise RunSettingsError(
            f"{name} has no roles, but agents were given by role ({', '.join(caller)}); "
            "give it one agent"
        )
    missing = [role for role in roles if role not in caller]
    unknown = [role for role in caller if role not in roles]
    if missing or unknown:
        problem = f"no agent for role {missing[0]!r}" if missing else f"no role {unknown[0]!r}"
        raise RunSettingsError(
            f"{name} has {problem}; its roles are {', '.join(roles)}: give an agent for each "
            "(--agent ROLE=NAME), or one agent for all of them (self-play)"
        )
    return {role: caller[role] for role in roles}


def as_callers(agent: Any) -> AgentCaller | dict[str, AgentCaller]:
    """An agent, or a dict of agents by role, as callers (one caller per distinct agent)."""
    if not isinstance(agent, dict):
        return agent if isinstance(agent, AgentCaller) else AgentCaller(agent)
    made: dict[int, AgentCaller] = {}
    for player in agent.values():
        if id(player) not in made:
            made[id(player)] = player if isinstance(player, AgentCaller) else AgentCaller(player)
    return {role: made[id(player)] for role, player in agent.items()}
