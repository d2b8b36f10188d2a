"""AgentGym's operations: create, reset, step, observation, close.

AgentGym's calls carry no counters, so they are applied as they come (each under the
session's lock), as AgentGym's own servers do. An AgentGym episode is finished when it
ends: ``finish_episode``'s terms are added to that last step's reward, where the
runner would put them.
"""

from __future__ import annotations

from typing import Any

from agentsgym import AgentAction
from agentsgym_serve.agentgym_shapes import (
    action_format_of,
    format_action,
    reply_extras,
)
from agentsgym_serve.errors import (
    EnvFailure,
    EpisodeState,
    NoTask,
    SessionClosed,
    UnknownSession,
)
from agentsgym_serve.schemas import (
    AgentGymReset,
    AgentGymStep,
)
from agentsgym_serve.service_core import SessionService, log_event
from agentsgym_serve.sessions import Session


class AgentGymOperations(SessionService):
    """What the routes of AgentGym's protocol call."""

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
        return {"id": session.id, **self._start_reply(session, session.observation)}

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
                session,
                session.episode + 1,
                tasks[body.task_index],
                f"agentgym-{session.id}",
                rollout_seed=body.rollout_seed,
            )
            return self._start_reply(session, reply["observation"])

    async def agentgym_step(self, body: AgentGymStep) -> dict[str, Any]:
        session = self.table.get(body.instance)
        async with self._use(session):
            self._check_can_step(session)
            action_format = action_format_of(session.hosted.env, self.agentgym_action_format)
            action = format_action(body.action, action_format)
            outcome, _, reward = await self._scored_step(session, AgentAction(text=action))
            session.score += reward
            extras = self._agentgym_extras(session)
        return {
            "observation": session.observation,
            "reward": reward,
            "score": session.score,
            "done": outcome.over,
            # beyond AgentGym's fields (its clients ignore it): the step limit ended it
            "truncated": outcome.truncated,
            **extras,
        }

    def _start_reply(self, session: Session, observation: Any) -> dict[str, Any]:
        """The reply to a create or reset: an episode's first observation, nothing scored."""
        return {
            "observation": observation,
            "reward": 0.0,
            "score": 0.0,
            "done": False,
            **self._agentgym_extras(session),
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
