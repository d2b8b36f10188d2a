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

``episode_id`` names the episode for the env's hooks (their ``session_id``); ``role``,
in an env with roles, the role the session plays (the server's agents play the
others; default: the server's, :mod:`agentsgym_serve.role_agents`) and
``rollout_seed`` the seed its agents play the rollout with. Other keys are dropped, as openenv-core drops the reset kwargs its env does not take (a key
this server knows, of the wrong type, is refused). The HTTP ``/reset`` and ``/step``
are stateless, as in openenv-core: each plays a fresh episode (``/step`` applies one
action to the first prompt of the task its extra fields select) and closes it;
episodes of several steps go over ``/ws``.

**Steps outside an episode**, answered as openenv-core's server answers them (it hands
every step to an env that is ready to play from the start, and keeps answering after
the end):

* a step before the session's first reset starts an episode as a reset without data
  would (the split's next task), then applies the action;
* a step after the episode ended applies nothing and is answered with the ended
  episode's observation: ``done`` true, reward 0, no messages, and ``metadata.ignored``
  saying why. A step after the episode *failed* (an env hook raised) is an
  ``EXECUTION_ERROR``, as openenv-core answers an env that raises.

**Observation shapes** (``--observation``): ``agentsgym`` (:class:`AgentsgymObservation`,
chat messages and reward terms) or ``textarena`` (:class:`TextArenaObservation`, the
shape of OpenEnv's text envs, which TRL's OpenEnv examples read).
"""

from __future__ import annotations

import itertools
import logging
from typing import Annotated, Any

import annotated_types
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from agentsgym import AgentAction, Messages
from agentsgym.runtime import TurnOutcome
from agentsgym_serve.errors import NoTask, SessionClosed, SessionFailed
from agentsgym_serve.openenv_models import OBSERVATION_SHAPES, AgentsgymAction
from agentsgym_serve.schemas import integral_float_to_int
from agentsgym_serve.service import EnvService
from agentsgym_serve.service_core import log_event
from agentsgym_serve.sessions import Session

logger = logging.getLogger("agentsgym_serve")

RESET_KEYS = ("seed", "episode_id", "task_data", "data_idx", "role", "rollout_seed")
GAME = -1
"""TextArena's sender id of the game (the env), in the ``textarena`` shape."""


NonNegativeInt = Annotated[int, annotated_types.Ge(0), BeforeValidator(integral_float_to_int)]


class OpenEnvReset(BaseModel):
    """The ``data`` of an OpenEnv reset on an agentsgym server (see the module docstring)."""

    # Unknown keys are dropped, as openenv-core drops them; a known key of a lax type is
    # refused: `{"data_idx": "3"}` is a mistake, said so.
    model_config = ConfigDict(extra="ignore", strict=True)

    seed: NonNegativeInt | None = Field(None, description="picks row seed % n of the split")
    episode_id: str | None = Field(
        None, max_length=255, description="the episode's id (the session_id the hooks see)"
    )
    task_data: dict[str, Any] | None = Field(None, description="the task itself")
    data_idx: NonNegativeInt | None = Field(None, description="the row of the served split")
    role: str | None = Field(
        None,
        min_length=1,
        max_length=255,
        description="an env with roles: the role this session plays (default: the one it "
        "played, else the server's --client-role or first trainable role)",
    )
    rollout_seed: NonNegativeInt | None = Field(
        None,
        description="an env with roles: the seed of the client's rollout, which seeds the "
        "server's agents (default: the server counts the task's episodes)",
    )

    @classmethod
    def read(cls, data: dict[str, Any]) -> OpenEnvReset:
        """The reset's parameters; the keys dropped are logged (at debug)."""
        params = cls.model_validate(data)
        dropped = sorted(set(data) - set(cls.model_fields))
        if dropped:
            logger.debug(
                "reset keys dropped",
                extra={"fields": {"event": "reset_keys_dropped", "keys": dropped[:20]}},
            )
        return params


class OpenEnvStep(OpenEnvReset):
    """The body of the stateless HTTP ``/step``: an action, and which task to apply it to."""

    action: dict[str, Any] = Field(description="an AgentsgymAction: {message, ...}")
    timeout_s: float | None = Field(None, gt=0, description="accepted, as openenv's; unused")
    request_id: str | None = Field(None, max_length=255, description="accepted; unused")


def as_action(action: AgentsgymAction) -> AgentAction:
    """An OpenEnv action as the reply the episode takes."""
    return AgentAction(
        text=action.message,
        token_ids=action.token_ids,
        truncated=action.truncated,
        tool_calls=action.tool_calls,
    )


class OpenEnvService:
    """OpenEnv's operations over an :class:`EnvService` (see the module docstring).

    :param observation: the observation shape sent, one of :data:`OBSERVATION_SHAPES`.
    """

    def __init__(self, service: EnvService, *, observation: str = "agentsgym") -> None:
        if observation not in OBSERVATION_SHAPES:
            raise ValueError(
                f"observation must be one of {', '.join(OBSERVATION_SHAPES)}, got {observation!r}"
            )
        self.service = service
        self.observation = observation
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
        if params.task_data is not None:  # itself, or a task shown in part (its reference)
            return await self.service.host.whole_task(session.hosted, params.task_data)
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

    # ------------------------------------------------------------------ episodes
    async def reset(self, session: Session, params: OpenEnvReset) -> dict[str, Any]:
        """Start the next episode; the payload of OpenEnv's observation reply."""
        async with self.service._use(session):
            reply = await self._start(session, params)
        return self._payload(
            session, reply["messages"], reply["observation"], reward=0.0, done=False
        )

    async def _start(self, session: Session, params: OpenEnvReset) -> dict[str, Any]:
        """The next episode (under the session's lock); the service's reset reply."""
        service = self.service
        task = await self._task(session, params)
        if not session.finished:
            await service._end_episode(
                session, truncated=False, error="reset before the episode ended", quiet=True
            )
        episode = session.episode + 1
        hook_session = params.episode_id or f"openenv-{session.id}-{episode}"
        reply = await service._start_episode(
            session, episode, task, hook_session, params.role, params.rollout_seed
        )
        session.transcript = session.prompt
        return reply

    async def in_episode(self, session: Session) -> bool:
        """Make sure the session plays an episode it can step (under its lock): the first
        one is started as a reset without data would; False: the episode is over."""
        if session.failed is not None:
            raise SessionFailed(
                f"episode {session.episode} of session {session.id} failed: {session.failed}; "
                "reset to start a new one"
            )
        if session.play is None:
            await self._start(session, OpenEnvReset())
        return not session.play.over  # type: ignore[union-attr]

    async def step(self, session: Session, action: AgentsgymAction) -> dict[str, Any]:
        """Apply one action; the payload of OpenEnv's observation reply."""
        async with self.service._use(session):
            if not await self.in_episode(session):
                return self.over(session)
            payload, _ = await self.turn(session, as_action(action))
        return payload

    async def turn(
        self, session: Session, reply: AgentAction
    ) -> tuple[dict[str, Any], TurnOutcome]:
        """One action on the session's episode (under its lock, in an episode that is not
        over); the observation payload, and the outcome."""
        outcome, finish, reward = await self.service._scored_step(session, reply)
        if self.observation == "textarena" and session.observation:  # only that shape reads it
            session.transcript += "\n\n" + session.observation
        payload = self._payload(
            session,
            [dict(m) for m in outcome.messages],
            session.observation,  # _apply_step's text of these messages
            reward=reward,
            done=outcome.over,
            step_reward=outcome.reward,
            terms=outcome.terms,
            finish=finish,
            info=outcome.info,
        )
        return payload, outcome

    def over(self, session: Session) -> dict[str, Any]:
        """The reply to a step after the episode ended: nothing is applied."""
        ignored = (
            f"episode {session.episode} of this session is over (at step {session.steps_taken}); "
            "this action was not applied: reset to start a new one"
        )
        return self._payload(session, [], "", reward=0.0, done=True, ignored=ignored)

    def _payload(
        self,
        session: Session,
        messages: Messages,
        text: str,
        *,
        reward: float,
        done: bool,
        step_reward: float = 0.0,
        terms: dict[str, float] | None = None,
        finish: dict[str, float] | None = None,
        info: dict[str, Any] | None = None,
        ignored: str | None = None,
    ) -> dict[str, Any]:
        """The ``{"observation", "reward", "done"}`` of a reply, in the server's shape."""
        fields = {
            "messages": messages,
            "text": text,
            "prompt": session.prompt,
            "step_reward": step_reward,
            "reward_terms": terms or {},
            "finish_terms": finish or {},
            "truncated": session.truncated,
            "info": info or {},
            "episode": session.episode,
            "step": session.steps_taken,
        }
        extra = {"metadata": {"ignored": ignored}} if ignored else {}
        if self.observation == "textarena":
            observation = {
                "prompt": fields.pop("prompt"),
                "messages": [
                    {"sender_id": GAME, "content": session.transcript, "category": "MESSAGE"}
                ],
                "current_player_id": 0,
                "legal_players": [0],
                "info": fields.pop("info"),
                "metadata": {"env_id": self.env_id, **fields, **extra.get("metadata", {})},
            }
        else:
            observation = {**fields, **extra}
        return {"observation": observation, "reward": reward, "done": done}

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
            "step_count": session.steps_taken,
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
