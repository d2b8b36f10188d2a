"""The server's operations, for both protocols: ordering, retries, episode ends.

Every call on a session runs under that session's lock, so calls on one session are
serialised and never interleaved. The agentsgym/v1 calls carry counters (the
episode a reset starts, the index of a step, a create's ``request_id``), which is
what makes them safe to retry over a network that drops replies:

* a call that repeats the last one applied (same episode and step, same action) is
  answered with the reply already given, and applied no second time;
* a call that is neither the next one nor that repeat is refused (409
  ``out_of_order``) and changes nothing;
* every reply names the session, episode and step it answers, so a client can tell
  a reply meant for another call.

AgentGym's calls carry no counters, so they are applied as they come (each still
under the session's lock), as AgentGym's own servers do.

``finish_episode`` runs exactly once per episode: when a v1 client finishes it,
when an AgentGym episode ends (its terms are then added to that last step's reward,
where the runner would put them), or, for an episode left unfinished, when the
session is reset, closed or reaped (with an ``error`` saying so).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from agentsgym import AgentAction, TurnOutcome
from agentsgym_serve.agentgym_shapes import (
    action_format_of,
    check_action_format,
    format_action,
    reply_extras,
)
from agentsgym_serve.errors import (
    EnvFailure,
    EpisodeState,
    NoTask,
    OutOfOrder,
    SessionClosed,
    SessionFailed,
    UnknownSession,
)
from agentsgym_serve.host import EnvHost, env_failure, observation_text
from agentsgym_serve.schemas import (
    AgentGymReset,
    AgentGymStep,
    ConfigRequest,
    CreateRequest,
    DatasetRequest,
    FinishRequest,
    ResetRequest,
    StepRequest,
)
from agentsgym_serve.sessions import Session, SessionTable

logger = logging.getLogger("agentsgym_serve")

SHUTDOWN_BUDGET_SECONDS = 10.0


def log_event(event: str, **fields: Any) -> None:
    """One structured event of the server's log (docs/serving.md lists them)."""
    logger.info(event, extra={"fields": {"event": event, **fields}})


class EnvService:
    """What the routes of both protocols call (see the module docstring)."""

    def __init__(
        self,
        host: EnvHost,
        table: SessionTable,
        *,
        agentgym_split: str = "train",
        agentgym_action_format: str | None = None,
    ) -> None:
        self.host = host
        self.table = table
        self.agentgym_split = agentgym_split
        # AgentGym's actions are put into this format (agentgym_shapes.format_action)
        self.agentgym_action_format = check_action_format(agentgym_action_format)
        self.steps_applied = 0
        self.steps_replayed = 0

    # ------------------------------------------------------------------ plumbing
    @contextlib.asynccontextmanager
    async def _use(self, session: Session) -> AsyncIterator[None]:
        """Hold the session's lock for one call (the reaper leaves it alone meanwhile)."""
        session.active += 1
        try:
            async with session.lock:
                if self.table.live.get(session.id) is not session:
                    raise SessionClosed(
                        f"session {session.id} was closed while this call waited for it",
                        id=session.id,
                    )
                yield
        finally:
            session.active -= 1
            self.table.touch(session)

    def _in_use(self, key: str) -> bool:
        return any(s.config_key == key for s in self.table.live.values())

    async def _start_episode(
        self, session: Session, episode: int, task_data: dict[str, Any], session_id: str | None
    ) -> dict[str, Any]:
        """A new episode on the session; the reset reply (also kept for retries)."""
        hook_session = session_id or f"serve-{session.id}"
        play = self.host.episode(session.hosted, hook_session, task_data)
        session.episode, session.session_id, session.play = episode, hook_session, play
        session.failed = None
        session.observation = session.prompt = session.transcript = ""
        session.score = 0.0
        session.last_step = session.last_finish = None
        try:
            messages = await play.start()
        except Exception as exc:  # noqa: BLE001 (the env's answer to this request)
            failure = env_failure(play, exc)
            session.failed = failure.detail
            await self._end_episode(session, error=failure.detail, quiet=True)
            raise failure from None
        session.observation = session.prompt = observation_text(messages)
        reply = {
            "id": session.id,
            "episode": episode,
            # a copy: the session's conversation grows, the reply kept for retries must not
            "messages": [dict(m) for m in messages],
            "observation": session.observation,
        }
        session.last_reset = (episode, reply)
        return reply

    async def _apply_step(self, session: Session, action: AgentAction) -> TurnOutcome:
        """One action on the session's episode: a tool turn or the env's step."""
        play = session.play
        assert play is not None  # _check_can_step saw an episode
        try:
            outcome = await play.step(action)
        except Exception as exc:  # noqa: BLE001 (the env's answer to this request)
            failure = env_failure(play, exc)
            session.failed = failure.detail
            raise failure from None
        session.observation = observation_text(outcome.messages)
        self.steps_applied += 1
        return outcome

    async def _end_episode(
        self,
        session: Session,
        *,
        truncated: bool = False,
        error: str | None = None,
        quiet: bool = False,
    ) -> dict[str, float]:
        """finish_episode for the current episode, once; its terms."""
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
        return finished.terms

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

    # ------------------------------------------------------------------ AgentGym
    async def agentgym_create(self) -> dict[str, Any]:
        """A new instance, with the first task of the split started (as the seed design
        and AgentGym's TextCraft server do): its observation comes with the id. An env
        without that split starts nothing and answers an empty observation."""
        hosted = self.host.default
        session, _ = self.table.create("agentgym", hosted.key)
        session.hosted = hosted
        log_event("session_created", id=session.id, protocol="agentgym", sessions=len(self.table))
        async with self._use(session):
            try:
                tasks = await self.host.tasks(hosted, self.agentgym_split)
            except NoTask:
                tasks = []
            if tasks:
                try:
                    await self._start_episode(session, 1, tasks[0], f"agentgym-{session.id}")
                except EnvFailure as exc:
                    await self._close(session, f"its first episode failed: {exc.detail}")
                    raise
        return {
            "id": session.id,
            "observation": session.observation,
            "reward": 0.0,
            "score": 0.0,
            "done": False,
            **self._agentgym_extras(session),
        }

    async def agentgym_reset(self, body: AgentGymReset) -> dict[str, Any]:
        session = self.table.get(body.instance)
        async with self._use(session):
            tasks = await self.host.tasks(session.hosted, self.agentgym_split)
            if body.task_index >= len(tasks):
                raise NoTask(
                    f"data_idx {body.task_index} is past the end of the {self.agentgym_split} "
                    f"dataset ({len(tasks)} tasks: 0..{len(tasks) - 1})"
                )
            if not session.finished:
                await self._end_episode(
                    session, truncated=False, error="reset before the episode ended", quiet=True
                )
            reply = await self._start_episode(
                session, session.episode + 1, tasks[body.task_index], f"agentgym-{session.id}"
            )
            extras = self._agentgym_extras(session)
        return {
            "observation": reply["observation"],
            "reward": 0.0,
            "score": 0.0,
            "done": False,
            **extras,
        }

    async def agentgym_step(self, body: AgentGymStep) -> dict[str, Any]:
        session = self.table.get(body.instance)
        async with self._use(session):
            self._check_can_step(session)
            action_format = action_format_of(session.hosted.env, self.agentgym_action_format)
            action = format_action(body.action, action_format)
            outcome = await self._apply_step(session, AgentAction(text=action))
            reward = outcome.reward + sum(outcome.terms.values())
            over = outcome.done or outcome.truncated
            if over:
                finish = await self._end_episode(session, truncated=outcome.truncated, error=None)
                reward += sum(finish.values())
            session.score += reward
            extras = self._agentgym_extras(session)
        return {
            "observation": session.observation,
            "reward": reward,
            "score": session.score,
            "done": over,
            **extras,
        }

    def _agentgym_extras(self, session: Session) -> dict[str, Any]:
        """The fields some of AgentGym's clients read (agentgym_shapes.reply_extras)."""
        play = session.play
        state = None if play is None or play.over else play.state
        env = session.hosted.env
        return reply_extras(env, state, session.observation, session.prompt)

    def agentgym_observation(self, session_id: int) -> dict[str, Any]:
        session = self.table.get(session_id)
        if session.episode == 0:
            raise EpisodeState(f"session {session_id} has no episode yet: /reset it first")
        return {"observation": session.observation}

    async def agentgym_close(self, session_id: int) -> dict[str, Any]:
        try:
            session = self.table.get(session_id)
        except (SessionClosed, UnknownSession) as exc:
            return {"closed": False, "error": exc.detail}
        async with self._use(session):
            closed = await self._close(session, "closed by the client")
        return {"closed": closed}

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

    # ------------------------------------------------------------------ agentsgym/v1
    async def env_config(self, body: ConfigRequest) -> dict[str, Any]:
        """The effective config for a client's env_config (its instance is built now)."""
        hosted = await self.host.hosted(body.env_config, self._in_use)
        return {"env_config": hosted.public_config}

    async def dataset(self, split: str, body: DatasetRequest) -> dict[str, Any]:
        hosted = await self.host.hosted(body.env_config, self._in_use)
        tasks = await self.host.tasks(hosted, split)
        return {
            "split": split,
            "total": len(tasks),
            "offset": body.offset,
            "env_config": hosted.public_config,
            "tasks": tasks[body.offset : body.offset + body.limit],
        }

    async def create(self, body: CreateRequest) -> dict[str, Any]:
        hosted = await self.host.hosted(body.env_config, self._in_use)
        session, new = self.table.create("agentsgym", hosted.key, body.request_id)
        if not new:
            async with self._use(session):
                if session.created_reply is None:  # the first call's episode failed
                    raise SessionFailed(f"session {session.id}: {session.failed}")
                return session.created_reply
        session.hosted = hosted
        log_event("session_created", id=session.id, protocol="agentsgym", sessions=len(self.table))
        async with self._use(session):
            messages: list[dict[str, str]] = []
            observation = ""
            episode = 0
            if body.task_data is not None:
                try:
                    reset = await self._start_episode(session, 1, body.task_data, body.session_id)
                except EnvFailure as exc:
                    await self._close(session, f"its first episode failed: {exc.detail}")
                    raise
                messages, observation, episode = reset["messages"], reset["observation"], 1
            session.created_reply = {
                "id": session.id,
                "token": session.token,
                "episode": episode,
                "env_config": hosted.public_config,
                "messages": messages,
                "observation": observation,
            }
            return session.created_reply

    async def reset(self, session_id: int, body: ResetRequest) -> dict[str, Any]:
        session = self.table.get(session_id, body.token)
        async with self._use(session):
            if session.last_reset is not None and session.last_reset[0] == body.episode:
                return session.last_reset[1]
            if body.episode != session.episode + 1:
                raise OutOfOrder(
                    f"a reset of session {session.id} for episode {body.episode}, but its last "
                    f"episode is {session.episode}: the next reset starts episode "
                    f"{session.episode + 1}",
                    episode=session.episode,
                )
            if not session.finished:
                await self._end_episode(
                    session, truncated=False, error="reset before the episode ended", quiet=True
                )
            return await self._start_episode(session, body.episode, body.task_data, body.session_id)

    async def step(self, session_id: int, body: StepRequest) -> dict[str, Any]:
        session = self.table.get(session_id, body.token)
        async with self._use(session):
            last = session.last_step
            said = (body.action, body.tool_calls)
            if last is not None and last[0] == body.episode and last[1] == body.step:
                if last[2] != said:
                    raise OutOfOrder(
                        f"step {body.step} of episode {body.episode} of session {session.id} "
                        "was already applied with a different action",
                        episode=session.episode,
                        step=session.step,
                    )
                self.steps_replayed += 1
                return last[3]
            if body.episode != session.episode:
                raise OutOfOrder(
                    f"session {session.id} is in episode {session.episode}, not {body.episode}",
                    episode=session.episode,
                    step=session.step,
                )
            self._check_can_step(session)
            if body.step != session.step:
                raise OutOfOrder(
                    f"the next step of episode {session.episode} of session {session.id} is "
                    f"{session.step}, not {body.step}",
                    episode=session.episode,
                    step=session.step,
                )
            action = AgentAction(
                text=body.action,
                token_ids=body.token_ids,
                truncated=body.truncated,
                tool_calls=body.tool_calls,
            )
            outcome = await self._apply_step(session, action)
            reply = {
                "id": session.id,
                "episode": session.episode,
                "step": body.step,
                "reward": outcome.reward,
                "reward_terms": outcome.terms,
                "done": outcome.done,
                "truncated": outcome.truncated,
                "info": outcome.info,
                "messages": [dict(m) for m in outcome.messages],
                "observation": session.observation,
            }
            session.last_step = (body.episode, body.step, said, reply)
            return reply

    async def finish(self, session_id: int, body: FinishRequest) -> dict[str, Any]:
        try:
            session = self.table.get(session_id, body.token)
        except SessionClosed:
            stone = self.table.tombstone(session_id, body.token)
            finished = stone.last_finish if stone is not None else None
            if finished is not None and finished[0] == body.episode:
                return finished[1]
            raise
        async with self._use(session):
            if session.last_finish is not None and session.last_finish[0] == body.episode:
                reply = session.last_finish[1]
            elif body.episode != session.episode:
                raise OutOfOrder(
                    f"session {session.id} is in episode {session.episode}, not {body.episode}",
                    episode=session.episode,
                )
            else:
                if session.finished:  # ended by the AgentGym protocol or a failed reset
                    terms: dict[str, float] = {}
                else:
                    terms = await self._end_episode(
                        session, truncated=body.truncated, error=body.error
                    )
                reply = {
                    "id": session.id,
                    "episode": session.episode,
                    "reward_terms": terms,
                    "closed": body.close,
                }
                session.last_finish = (body.episode, reply)
            if body.close:
                await self._close(session, "finished")
            return reply

    async def close(self, session_id: int, token: str) -> dict[str, Any]:
        try:
            session = self.table.get(session_id, token)
        except SessionClosed:
            if self.table.tombstone(session_id, token) is None:
                raise
            return {"id": session_id, "closed": False}
        async with self._use(session):
            closed = await self._close(session, "closed by the client")
        return {"id": session_id, "closed": closed}

    def session_state(self, session_id: int, token: str) -> dict[str, Any]:
        session = self.table.get(session_id, token)
        return {
            "id": session.id,
            "episode": session.episode,
            "step": session.step,
            "done": session.done,
            "truncated": session.truncated,
            "finished": session.finished,
            "messages": session.messages,
            "observation": session.observation,
            "idle_seconds": max(0.0, self.table.clock() - session.last_used),
        }

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
