"""OpenEnv sessions on the env server: reset, step, state and close of one connection.

An OpenEnv client holds one WebSocket (``/ws``) per session; each connection is one
session of the server's session table (origin ``openenv``), so it counts against
``--max-sessions``, is reaped after ``--idle-timeout`` and runs its calls one at a
time under the session's lock, exactly like the sessions of the other protocols.
The episode logic is :class:`~agentsgym_serve.service.EnvService`'s: the same
hooks, checks and ``finish_episode`` bookkeeping.

**Which task a reset starts** (its ``data``, OpenEnv's reset kwargs):

* ``task_data``: that task (a dict, as a dataset row's ``task_data``);
* else ``data_idx``: row ``data_idx`` of the served split (``--split``);
* else ``seed``: row ``seed % n`` of the split (a reproducible pick);
* else the split's next row, cycling (a server-wide counter).

``episode_id`` names the episode for the env's hooks (their ``session_id``). Any
other key is refused, naming the keys a reset takes. The HTTP ``/reset`` and
``/step`` are stateless, as in openenv-core: each plays a fresh episode (``/step``
applies one action to the first prompt of the task its extra fields select) and
closes it; episodes of several steps go over ``/ws``.
"""

from __future__ import annotations

import itertools
from typing import Annotated, Any

import annotated_types
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from agentsgym.types import AgentAction
from agentsgym_serve.errors import NoTask, SessionClosed
from agentsgym_serve.openenv_models import AgentsgymAction
from agentsgym_serve.schemas import integral_float_to_int
from agentsgym_serve.service import EnvService, log_event
from agentsgym_serve.sessions import Session

RESET_KEYS = ("seed", "episode_id", "task_data", "data_idx")


NonNegativeInt = Annotated[int, annotated_types.Ge(0), BeforeValidator(integral_float_to_int)]


class OpenEnvReset(BaseModel):
    """The ``data`` of an OpenEnv reset on an agentsgym server (see the module docstring)."""

    # Unknown keys and lax types are refused: `{"data_idx": "3"}` is a mistake, said so.
    model_config = ConfigDict(extra="forbid", strict=True)

    seed: NonNegativeInt | None = Field(None, description="picks row seed % n of the split")
    episode_id: str | None = Field(
        None, max_length=255, description="the episode's id (the session_id the hooks see)"
    )
    task_data: dict[str, Any] | None = Field(None, description="the task itself")
    data_idx: NonNegativeInt | None = Field(None, description="the row of the served split")


class OpenEnvStep(OpenEnvReset):
    """The body of the stateless HTTP ``/step``: an action, and which task to apply it to."""

    action: dict[str, Any] = Field(description="an AgentsgymAction: {message, ...}")
    timeout_s: float | None = Field(None, gt=0, description="accepted, as openenv's; unused")
    request_id: str | None = Field(None, max_length=255, description="accepted; unused")


class OpenEnvService:
    """OpenEnv's operations over an :class:`EnvService` (see the module docstring)."""

    def __init__(self, service: EnvService) -> None:
        self.service = service
        self._next_row = itertools.count()

    @property
    def env_id(self) -> str:
        return self.service.host.spec.id

    def open(self) -> Session:
        """A new session for a connection (ServerFull past ``max_sessions``)."""
        hosted = self.service.host.default
        table = self.service.table
        session, _ = table.create("openenv", hosted.key)
        session.hosted = hosted
        log_event("session_created", id=session.id, protocol="openenv", sessions=len(table))
        return session

    async def close(self, session: Session, reason: str) -> None:
        """Finish the unfinished episode (with ``reason``) and close the session."""
        if self.service.table.live.get(session.id) is not session:
            return
        async with session.lock:
            if self.service.table.live.get(session.id) is session:
                await self.service._close(session, reason)

    async def _task(self, session: Session, params: OpenEnvReset) -> dict[str, Any]:
        if params.task_data is not None:
            return params.task_data
        split = self.service.agentgym_split
        try:
            tasks = await self.service.host.tasks(session.hosted, split)
        except NoTask:
            raise NoTask(
                f"{self.env_id} ships no {split} dataset to pick a task from; pass the task "
                "itself: reset(task_data={...})"
            ) from None
        if not tasks:
            raise NoTask(f"the {split} split of {self.env_id} is empty; pass task_data")
        if params.data_idx is not None:
            if params.data_idx >= len(tasks):
                raise NoTask(
                    f"data_idx {params.data_idx} is past the end of the {split} split "
                    f"({len(tasks)} tasks: 0..{len(tasks) - 1})"
                )
            return tasks[params.data_idx]
        if params.seed is not None:
            return tasks[params.seed % len(tasks)]
        return tasks[next(self._next_row) % len(tasks)]

    async def reset(self, session: Session, params: OpenEnvReset) -> dict[str, Any]:
        """Start the next episode; the payload of OpenEnv's observation reply."""
        service = self.service
        async with service._use(session):
            task = await self._task(session, params)
            if not session.finished:
                await service._end_episode(
                    session, truncated=False, error="reset before the episode ended", quiet=True
                )
            episode = session.episode + 1
            hook_session = params.episode_id or f"openenv-{session.id}-{episode}"
            reply = await service._start_episode(session, episode, task, hook_session)
        observation = {
            "messages": reply["messages"],
            "text": reply["observation"],
            "step_reward": 0.0,
            "reward_terms": {},
            "finish_terms": {},
            "truncated": False,
            "info": {},
            "episode": episode,
            "step": 0,
        }
        return {"observation": observation, "reward": 0.0, "done": False}

    async def step(self, session: Session, action: AgentsgymAction) -> dict[str, Any]:
        """Apply one action; the payload of OpenEnv's observation reply."""
        service = self.service
        async with service._use(session):
            service._check_can_step(session)
            reply = AgentAction(
                text=action.message,
                token_ids=action.token_ids,
                truncated=action.truncated,
                tool_calls=action.tool_calls,
            )
            outcome = await service._apply_step(session, reply)
            over = outcome.done or outcome.truncated
            finish: dict[str, float] = {}
            if over:
                finish = await service._end_episode(
                    session, truncated=outcome.truncated, error=None
                )
            reward = outcome.reward + sum(outcome.terms.values()) + sum(finish.values())
            session.score += reward
            observation = {
                "messages": [dict(m) for m in outcome.messages],
                "text": session.observation,
                "step_reward": outcome.reward,
                "reward_terms": outcome.terms,
                "finish_terms": finish,
                "truncated": outcome.truncated,
                "info": outcome.info,
                "episode": session.episode,
                "step": session.step,
            }
        return {"observation": observation, "reward": reward, "done": over}

    def state(self, session: Session | None) -> dict[str, Any]:
        """OpenEnv's state of the session's episode (of a fresh env, without a session)."""
        if session is None:
            return {
                "episode_id": None,
                "step_count": 0,
                "env_id": self.env_id,
                "episode": 0,
                "done": False,
                "truncated": False,
                "messages": [],
            }
        if self.service.table.live.get(session.id) is not session:
            raise SessionClosed(f"session {session.id} is closed", id=session.id)
        return {
            "episode_id": session.session_id or None,
            "step_count": session.step,
            "env_id": self.env_id,
            "episode": session.episode,
            "done": session.done or session.truncated,
            "truncated": session.truncated,
            "messages": [dict(m) for m in session.messages],
        }

    async def stateless(
        self, params: OpenEnvReset, action: AgentsgymAction | None = None
    ) -> dict[str, Any]:
        """HTTP ``/reset`` (no action) or ``/step``: one fresh episode, closed afterwards."""
        session = self.open()
        try:
            payload = await self.reset(session, params)
            if action is not None:
                payload = await self.step(session, action)
        finally:
            await self.close(session, "a stateless HTTP call (use /ws for whole episodes)")
        return payload
