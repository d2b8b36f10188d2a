"""The local engine's episode: an agent drives an :class:`EpisodeSession`.

The session decides everything about the episode (tool turns, truncation, hook
budgets, reward terms, tokens; see :mod:`agentsgym.engine.session`). This driver
asks the agent for each action, feeds it to the session, and bounds the whole episode by
``episode_timeout_seconds``. In an env with roles it asks the agent of the role whose
turn it is (one agent in every role is self-play), each with its own state. A failure
(the agent's or the env's) is recorded on the episode, never raised: one bad episode
must not sink a batch.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from agentsgym.agents import AgentCaller
from agentsgym.engine.hook_runtime import HookRuntime
from agentsgym.engine.play import Players, as_callers, callers_by_role, play_until
from agentsgym.engine.session import EpisodeSession
from agentsgym.errors import EpisodeError, EpisodeTimeoutError
from agentsgym.trajectory import Episode
from agentsgym.types import EpisodeContext
from agentsgym.worker_pool import WorkerPool

if TYPE_CHECKING:
    from agentsgym.engine.playable import PlayableEnv

__all__ = ["EpisodeRun", "aplay_episode", "aplay_role_episodes", "own_episodes"]


def own_episodes(env: Any) -> Any:
    """The env's ``aplay_own_episode(task_data, agent, context)`` coroutine function when
    it plays its episodes itself (a harness env runs an agent program whose model calls a
    gateway records), else ``None``."""
    return getattr(env, "aplay_own_episode", None)


class EpisodeRun:
    """One episode of the task registered under ``session_id``, played by an agent.

    In an env with roles, ``caller`` may be a dict of callers by role (every role must
    have one), or one caller that plays every role (self-play); ``agent_state`` is then
    a dict of states by role (``None``: each role starts from ``None``).
    """

    def __init__(
        self,
        env: PlayableEnv,
        session_id: str,
        caller: AgentCaller | dict[str, AgentCaller],
        agent_state: Any,
        *,
        context: EpisodeContext,
        runtime: HookRuntime,
    ) -> None:
        if session_id not in env.sessions:
            raise EpisodeError(
                f"unknown session {session_id!r}; register its task first with "
                "env.new_session(task_data)"
            )
        self.env = env
        roles = env.role_names
        callers = callers_by_role(caller, roles, env)
        if roles:
            states = agent_state if isinstance(agent_state, dict) else {}
            agent_states: dict[str | None, Any] = {r: states.get(r) for r in roles}
        else:
            agent_states = {None: agent_state}
        self.players = Players(callers, agent_states, context)
        self.session = EpisodeSession(
            env,
            session_id,
            env.sessions[session_id],
            runtime=runtime,
            token_in=self.players.token_in,
            rollout_seed=context.seed,
        )

    @property
    def agent_state(self) -> Any:
        """The agent's state (in an env with roles: the states by role)."""
        if self.session.roles:
            return dict(self.players.states)
        return self.players.states[None]

    async def play(self) -> Episode:
        """Play the episode; the (first role's) episode record."""
        return (await self.play_roles())[0]

    async def play_roles(self) -> tuple[Episode, ...]:
        """Play the episode; every role's episode record, in the env's role order."""
        session = self.session
        budget = self.env.config.episode_timeout_seconds
        try:
            await asyncio.wait_for(self._play_turns(), budget)
        except asyncio.TimeoutError:
            session.fail(
                EpisodeTimeoutError(
                    f"the episode did not finish within episode_timeout_seconds={budget:g} "
                    f"(it was in {session.phase}); raise the budget with --env-config "
                    "episode_timeout_seconds=N"
                )
            )
        for role, view in session.recorder.views.items():
            view.episode.agent_state = self.players.states[role]
        finished = await session.finish()
        return finished.episodes

    async def _play_turns(self) -> None:
        # The session and play_until record every failure on the episode (then raise it
        # to stop the play): one bad episode must not sink a batch.
        with contextlib.suppress(Exception):
            await self.session.start()
            await play_until(self.session, self.players)


async def aplay_episode(
    env: PlayableEnv,
    session_id: str,
    agent: Any,
    agent_state: Any = None,
    *,
    context: EpisodeContext | None = None,
    runtime: HookRuntime | None = None,
) -> Episode:
    """Play one episode of the task registered under ``session_id``; unpadded.
    Without a ``runtime`` (one env's for the whole run) it makes a small worker pool."""
    return (
        await aplay_role_episodes(
            env, session_id, agent, agent_state, context=context, runtime=runtime
        )
    )[0]


async def aplay_role_episodes(
    env: PlayableEnv,
    session_id: str,
    agent: Any,
    agent_state: Any = None,
    *,
    context: EpisodeContext | None = None,
    runtime: HookRuntime | None = None,
) -> tuple[Episode, ...]:
    """Play one episode; every role's record, in the env's role order (one without
    roles). ``agent``: one agent (every role: self-play) or a dict of agents by role.

    An env with an ``aplay_own_episode(task_data, agent, context)`` coroutine plays its
    episodes itself (a harness env runs an agent program whose model calls a gateway
    records) and returns the Episode: the engine hands it the agent, nothing more."""
    if context is None:
        context = EpisodeContext(session_id, env.env_id, 0, 0, 0, 0)
    own = getattr(env, "aplay_own_episode", None)
    if own is not None:
        player = agent.agent if isinstance(agent, AgentCaller) else agent
        return (await own(env.sessions[session_id], player, context),)
    caller = as_callers(agent)
    pool = None
    if runtime is None:
        pool = WorkerPool(2, name="agentsgym-episode")
        runtime = HookRuntime(env, pool)
    try:
        run = EpisodeRun(env, session_id, caller, agent_state, context=context, runtime=runtime)
        return await run.play_roles()
    finally:
        if pool is not None:
            pool.close()
