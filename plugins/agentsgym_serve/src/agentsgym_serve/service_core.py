"""The sessions under both protocols' operations: their locks, episodes and upkeep.

A session's episode is an :class:`agentsgym.runtime.EpisodeSession` (started, stepped and
finished here, for AgentGym's calls and agentsgym/v1's alike); every call on a
session holds that session's lock. Idle sessions are reaped, and the server's
shutdown finishes and closes the live ones. The operations of each protocol are in
``service_agentgym`` and ``service_v1``; ``service.EnvService`` joins them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from agentsgym import AgentAction
from agentsgym.runtime import TurnOutcome, play_turn, play_until
from agentsgym_serve.agentgym_shapes import (
    check_action_format,
)
from agentsgym_serve.errors import (
    BadRole,
    EnvFailure,
    EpisodeState,
    SessionClosed,
    SessionFailed,
)
from agentsgym_serve.host import EnvHost, HostedEnv, env_failure, observation_text
from agentsgym_serve.role_agents import RoleAgents
from agentsgym_serve.sessions import Session, SessionTable

logger = logging.getLogger("agentsgym_serve")

SHUTDOWN_BUDGET_SECONDS = 10.0


class SessionCall:
    """``async with`` it: one call on a session, holding the session's lock; counted as
    active meanwhile (the reaper leaves it alone) and touched when it ends. A session
    closed while the call waited for its lock raises :class:`SessionClosed`.

    A class, not an ``asynccontextmanager``: every step of every protocol enters one,
    and a generator's context costs about 1.5 µs more a call."""

    __slots__ = ("session", "table")

    def __init__(self, table: SessionTable, session: Session) -> None:
        self.table = table
        self.session = session

    async def __aenter__(self) -> None:
        session = self.session
        session.active += 1
        try:
            await session.lock.acquire()
        except BaseException:
            self._done()
            raise
        if self.table.live.get(session.id) is not session:
            session.lock.release()
            self._done()
            raise SessionClosed(
                f"session {session.id} was closed while this call waited for it", id=session.id
            )

    async def __aexit__(self, *exc: object) -> None:
        self.session.lock.release()
        self._done()

    def _done(self) -> None:
        self.session.active -= 1
        self.table.touch(self.session)


def log_event(event: str, **fields: Any) -> None:
    """One structured event of the server's log (docs/serving.md lists them)."""
    logger.info(event, extra={"fields": {"event": event, **fields}})


class SessionService:
    """Sessions, their episodes and their upkeep (see the module docstring)."""

    def __init__(
        self,
        host: EnvHost,
        table: SessionTable,
        *,
        agentgym_split: str = "train",
        agentgym_action_format: str | None = None,
        role_agents: RoleAgents | None = None,
    ) -> None:
        self.host = host
        self.table = table
        # an env with roles: the server's agents play the roles its clients do not
        self.role_agents = role_agents
        self.agentgym_split = agentgym_split
        # AgentGym's actions are put into this format (agentgym_shapes.format_action)
        self.agentgym_action_format = check_action_format(agentgym_action_format)
        self.steps_applied = 0
        self.steps_replayed = 0

    # ------------------------------------------------------------------ plumbing
    def _use(self, session: Session) -> SessionCall:
        """Hold the session's lock for one call (the reaper leaves it alone meanwhile)."""
        return SessionCall(self.table, session)

    def _in_use(self, key: str) -> bool:
        return any(s.config_key == key for s in self.table.live.values())

    def _client_role(self, hosted: HostedEnv, asked: str | None) -> str | None:
        """The role a client plays on ``hosted`` (None: the env has no roles): the one it
        asked for, checked, else the server's default."""
        if self.role_agents is None:
            if asked is not None:
                raise BadRole(
                    f"{self.host.spec.id} has no roles: a client plays all of it; leave role out"
                )
            return None
        return self.role_agents.role_of(hosted.env, asked)

    async def _start_episode(
        self,
        session: Session,
        episode: int,
        task_data: dict[str, Any],
        session_id: str | None,
        role: str | None = None,
        rollout_seed: int | None = None,
    ) -> dict[str, Any]:
        """A new episode on the session; the reset reply (also kept for retries).
        ``role``: the role the client plays from now on (None: the one it played, else
        the server's default; only for an env with roles). ``rollout_seed``: the seed of
        the client's rollout, for the server's agents (None: the task's next rollout
        here, :meth:`RoleAgents.rollout`)."""
        if self.role_agents is not None or role is not None:
            session.role = self._client_role(session.hosted, role or session.role)
        hook_session = session_id or f"serve-{session.id}"
        # The server's agents keep their states into the next episode as a local trial's
        # agents do: after an episode of the same task that ended (not one cut short by a
        # reset, as AgentGym's create starts one its client may replace).
        ended = session.failed is None and (session.done or session.truncated)
        if not (ended and session.agents_task == task_data):
            session.agent_states.clear()
        session.agents_task = task_data
        rollout = (0, rollout_seed or 0)
        if self.role_agents is not None:
            rollout = self.role_agents.rollout(session.hosted.key, task_data, rollout_seed)
        play = self.host.episode(session.hosted, hook_session, task_data, rollout[1])
        session.episode, session.session_id, session.play = episode, hook_session, play
        session.players = None
        if self.role_agents is not None:  # they play the roles the client does not
            session.players = self.role_agents.players(
                hook_session, session.agent_states, episode - 1, rollout
            )
        session.failed = None
        session.observation = session.prompt = session.transcript = ""
        session.score = 0.0
        session.last_step = session.last_finish = None
        try:
            await play.start()
            if session.players is not None:
                await play_until(play, session.players, until=session.role)
        except Exception as exc:  # noqa: BLE001 (the env's answer to this request)
            failure = env_failure(play, exc)
            session.failed = failure.detail
            await self._end_episode(session, error=failure.detail, quiet=True)
            raise failure from None
        messages = session.messages
        session.observation = session.prompt = observation_text(messages)
        reply = {
            "id": session.id,
            "episode": episode,
            # a copy: the session's conversation grows, the reply kept for retries must not
            "messages": [dict(m) for m in messages],
            "observation": session.observation,
            "role": session.role,
        }
        session.last_reset = (episode, reply)
        return reply

    async def _apply_step(self, session: Session, action: AgentAction) -> TurnOutcome:
        """One action of the client on the session's episode (a tool turn or the env's
        step), then, in an env with roles, the server's agents' turns until it is the
        client's turn again: the outcome as the client's role sees it."""
        play = session.play
        assert play is not None  # _check_can_step saw an episode
        try:
            outcome = await play_turn(play, action, session.role, session.players)
        except Exception as exc:  # noqa: BLE001 (the env's or an agent's answer)
            failure = env_failure(play, exc)
            session.failed = failure.detail
            raise failure from None
        session.observation = observation_text(outcome.messages)
        self.steps_applied += 1
        return outcome

    async def _scored_step(
        self, session: Session, action: AgentAction
    ) -> tuple[TurnOutcome, dict[str, float], float]:
        """One action, and the episode finished when it ended (the protocols whose
        clients never finish: OpenEnv's, AgentGym's): the outcome, what finishing added
        to the client's last step, and the step's whole reward (the env's, its terms,
        and those)."""
        outcome = await self._apply_step(session, action)
        finish: dict[str, float] = {}
        if outcome.over:
            finish = await self._end_episode(session, truncated=outcome.truncated, error=None)
        reward = outcome.reward + sum(outcome.terms.values()) + sum(finish.values())
        return outcome, finish, reward

    async def _end_episode(
        self,
        session: Session,
        *,
        truncated: bool = False,
        error: str | None = None,
        quiet: bool = False,
    ) -> dict[str, float]:
        """finish_episode for the current episode, once; what finishing added to the
        client's (role's) last step."""
        play = session.play
        if play is None or play.finished:
            return {}
        finished = await play.finish(truncated=truncated, error=error)
        if finished.error is not None:
            if not quiet:
                raise EnvFailure(finished.error)
            logger.warning(
                "finish_episode failed",
                extra={
                    "fields": {"event": "finish_failed", "id": session.id, "error": finished.error}
                },
            )
        return finished.settled.get(session.role, {})

    async def _close(self, session: Session, reason: str) -> bool:
        """End an unfinished episode (with an error saying why) and close the session."""
        if not (session.finished or session.episode == 0):
            await self._end_episode(
                session, truncated=False, error=f"session closed: {reason}", quiet=True
            )
        closed = self.table.close(session, reason)
        if closed:
            log_event("session_closed", id=session.id, reason=reason, sessions=len(self.table))
            if session.on_close is not None:  # an OpenEnv connection: it is told why
                session.on_close(reason)
        return closed

    def _check_can_step(self, session: Session) -> None:
        if session.failed is not None:
            raise SessionFailed(
                f"episode {session.episode} of session {session.id} failed: {session.failed}; "
                "reset to start a new one"
            )
        if session.play is None:
            raise EpisodeState(f"session {session.id} has no episode yet: reset it first")
        if session.play.over:  # ended, or finished
            raise EpisodeState(
                f"episode {session.episode} of session {session.id} is over; reset to start "
                "a new one"
            )

    # ------------------------------------------------------------------ upkeep
    async def reap_idle(self) -> int:
        """Close the sessions idle for longer than the table's idle_timeout."""
        reaped = 0
        for session in self.table.idle():
            async with session.lock:
                idle_for = self.table.clock() - session.last_used
                if session.active or idle_for < self.table.idle_timeout:
                    continue  # a call came in meanwhile
                if self.table.live.get(session.id) is not session:
                    continue
                if await self._close(session, f"idle for {idle_for:.0f} s (reaped)"):
                    reaped += 1
        return reaped

    async def reaper(self) -> None:
        """Reap idle sessions forever (a task of the app's lifespan)."""
        interval = min(max(self.table.idle_timeout / 4, 0.05), 10.0)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.reap_idle()
            except Exception:  # the reaper must outlive any one bad session
                logger.exception("reaping idle sessions failed")

    async def shutdown(self) -> None:
        """Finish and close every live session (best effort, within a budget)."""
        sessions = list(self.table.live.values())

        async def close_one(session: Session) -> None:
            async with session.lock:
                await self._close(session, "the server shut down")

        if sessions:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(
                    asyncio.gather(*(close_one(s) for s in sessions), return_exceptions=True),
                    SHUTDOWN_BUDGET_SECONDS,
                )
        self.host.close()
