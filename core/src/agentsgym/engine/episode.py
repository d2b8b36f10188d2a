"""The local engine's episode: an agent drives an :class:`EpisodeSession`.

The session decides everything about the episode (tool turns, truncation, hook
budgets, reward terms, tokens; see :mod:`agentsgym.engine.session`). This driver
asks the agent for each action, feeds it to the session, and bounds the whole
episode by ``episode_timeout_seconds``. A failure (the agent's or the env's) is
recorded on the episode, never raised: one bad episode must not sink a batch.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from agentsgym.agents import AgentCaller
from agentsgym.engine.hook_runtime import HookRuntime
from agentsgym.engine.session import EpisodeSession
from agentsgym.errors import EpisodeError, EpisodeTimeoutError
from agentsgym.trajectory import Episode
from agentsgym.types import EpisodeContext
from agentsgym.worker_pool import WorkerPool

if TYPE_CHECKING:
    from agentsgym.engine.playable import PlayableEnv

__all__ = ["EpisodeRun", "aplay_episode"]


class EpisodeRun:
    """One episode of the task registered under ``session_id``, played by an agent."""

    def __init__(
        self,
        env: PlayableEnv,
        session_id: str,
        caller: AgentCaller,
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
        self.caller = caller
        self.agent_state = agent_state
        self.context = context
        self.session = EpisodeSession(
            env,
            session_id,
            env.sessions[session_id],
            runtime=runtime,
            token_in=caller.token_in,
        )

    @property
    def episode(self) -> Episode:
        return self.session.episode

    async def play(self) -> Episode:
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
        session.episode.agent_state = self.agent_state
        finished = await session.finish()
        return finished.episode

    async def _play_turns(self) -> None:
        session = self.session
        caller = self.caller
        try:
            await session.start()
            while not session.over:
                session.phase = "the agent"
                action, self.agent_state = await caller.act(
                    session.messages,
                    self.agent_state,
                    prompt_token_ids=session.prompt_token_ids() if caller.token_in else None,
                    context=self._context() if caller.takes_context else None,
                    pool=session.runtime.pool,
                )
                await session.step(action)
        except Exception as exc:  # noqa: BLE001 - recorded: one bad episode must not sink a batch
            session.fail(exc)  # the session's own failures are recorded already

    def _context(self) -> EpisodeContext:
        c = self.context
        return EpisodeContext(
            c.session_id,
            c.env_id,
            c.task_index,
            c.rollout_index,
            c.episode_index,
            c.seed,
            self.session.steps_taken,
            self.session.tools,
        )


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
    caller = agent if isinstance(agent, AgentCaller) else AgentCaller(agent)
    if context is None:
        context = EpisodeContext(session_id, env.env_id, 0, 0, 0, 0)
    pool = None
    if runtime is None:
        pool = WorkerPool(2, name="agentsgym-episode")
        runtime = HookRuntime(env, pool)
    try:
        run = EpisodeRun(env, session_id, caller, agent_state, context=context, runtime=runtime)
        return await run.play()
    finally:
        if pool is not None:
            pool.close()
