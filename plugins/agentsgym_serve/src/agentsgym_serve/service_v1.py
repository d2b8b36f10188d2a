"""agentsgym/v1's operations: env config, datasets, create, reset, step, finish, close.

The calls carry counters (the episode a reset starts, the index of a step, a create's
``request_id``), which is what makes them safe to retry over a network that drops
replies:

* a call that repeats the last one applied (same episode and step, same action) is
  answered with the reply already given, and applied no second time;
* a call that is neither the next one nor that repeat is refused (409
  ``out_of_order``) and changes nothing;
* every reply names the session, episode and step it answers, so a client can tell
  a reply meant for another call.
"""

from __future__ import annotations

from typing import Any

from agentsgym import AgentAction
from agentsgym_serve.errors import (
    EnvFailure,
    OutOfOrder,
    SessionClosed,
    SessionFailed,
)
from agentsgym_serve.schemas import (
    ConfigRequest,
    CreateRequest,
    DatasetRequest,
    FinishRequest,
    ResetRequest,
    StepRequest,
    ToolsRequest,
)
from agentsgym_serve.service_core import SessionService, log_event


class V1Operations(SessionService):
    """What the routes of agentsgym/v1 call."""

    # ------------------------------------------------------------------ agentsgym/v1
    async def env_config(self, body: ConfigRequest) -> dict[str, Any]:
        """The effective config for a client's env_config (its instance is built now),
        and the role its sessions play by default (an env with roles)."""
        hosted = await self.host.hosted(body.env_config, self._in_use)
        return {"env_config": hosted.public_config, "role": self._client_role(hosted, None)}

    async def dataset(self, split: str, body: DatasetRequest) -> dict[str, Any]:
        """A page of a split's tasks, as a client of the role it names (else the default
        role) may see them: without the other roles' private keys."""
        hosted = await self.host.hosted(body.env_config, self._in_use)
        tasks = await self.host.shown_tasks(hosted, split, self._client_role(hosted, body.role))
        return {
            "split": split,
            "total": len(tasks),
            "offset": body.offset,
            "env_config": hosted.public_config,
            "tasks": tasks[body.offset : body.offset + body.limit],
        }

    async def tools(self, body: ToolsRequest) -> dict[str, Any]:
        """The schemas of a task's episode tools (``None``: none), for a client to render
        its prompts with before the episode starts."""
        hosted = await self.host.hosted(body.env_config, self._in_use)
        task = await self.host.whole_task(hosted, body.task_data)
        return {"tools": await self.host.tool_schemas(hosted, task)}

    async def create(self, body: CreateRequest) -> dict[str, Any]:
        hosted = await self.host.hosted(body.env_config, self._in_use)
        role = self._client_role(hosted, body.role)
        task = (
            None if body.task_data is None else await self.host.whole_task(hosted, body.task_data)
        )
        session, new = self.table.create("agentsgym", hosted.key, body.request_id)
        if not new:
            async with self._use(session):
                if session.created_reply is None:  # the first call's episode failed
                    raise SessionFailed(f"session {session.id}: {session.failed}")
                return session.created_reply
        session.hosted, session.role = hosted, role
        log_event("session_created", id=session.id, protocol="agentsgym", sessions=len(self.table))
        async with self._use(session):
            messages: list[dict[str, str]] = []
            observation = ""
            episode = 0
            if task is not None:
                try:
                    reset = await self._start_episode(
                        session, 1, task, body.session_id, rollout_seed=body.rollout_seed
                    )
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
                "role": session.role,
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
            if body.role is not None:  # refused before the episode it would replace ends
                self._client_role(session.hosted, body.role)
            task = await self.host.whole_task(session.hosted, body.task_data)
            if not session.finished:
                await self._end_episode(
                    session, truncated=False, error="reset before the episode ended", quiet=True
                )
            return await self._start_episode(
                session, body.episode, task, body.session_id, body.role, body.rollout_seed
            )

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
                        step=session.steps_taken,
                    )
                self.steps_replayed += 1
                return last[3]
            if body.episode != session.episode:
                raise OutOfOrder(
                    f"session {session.id} is in episode {session.episode}, not {body.episode}",
                    episode=session.episode,
                    step=session.steps_taken,
                )
            self._check_can_step(session)
            if body.step != session.steps_taken:
                raise OutOfOrder(
                    f"the next step of episode {session.episode} of session {session.id} is "
                    f"{session.steps_taken}, not {body.step}",
                    episode=session.episode,
                    step=session.steps_taken,
                )
            action = AgentAction(
                text=body.action,
                token_ids=body.token_ids,
                truncated=body.truncated,
                tool_calls=body.tool_calls,
            )
            seen = len(session.messages)  # the action's message comes next
            outcome = await self._apply_step(session, action)
            tool_turn: dict[str, Any] = {"tool_call_reply": None, "tool_results": None}
            if outcome.tool_results is not None:  # the action as its toolbox read its calls
                tool_turn["tool_call_reply"] = dict(session.messages[seen])
                tool_turn["tool_results"] = [dict(m) for m in outcome.tool_results]
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
                **tool_turn,
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
            "step": session.steps_taken,
            "done": session.done,
            "truncated": session.truncated,
            "finished": session.finished,
            "messages": session.messages,
            "observation": session.observation,
            "role": session.role,
            "idle_seconds": max(0.0, self.table.clock() - session.last_used),
        }
