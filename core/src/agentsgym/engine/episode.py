"""One episode: the env's hooks, the agent, the token stream, rewards.

Between two agent actions the env takes one *turn* (apply the action, shape its
reward, prompt, tokenize), run by :class:`~agentsgym.engine.hook_runtime.HookRuntime`.
A failure (an exception, a timeout) is recorded on the episode, never raised: one bad
episode must not sink a batch. ``finish_episode`` runs at the end however it ended.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from functools import partial
from typing import TYPE_CHECKING, Any

from agentsgym.agents import AgentCaller
from agentsgym.engine.hook_results import as_messages, as_step_result, collect_terms
from agentsgym.engine.hook_runtime import HookRuntime
from agentsgym.errors import EpisodeError, EpisodeTimeoutError
from agentsgym.redaction import redact_text
from agentsgym.rewards import assign_token_rewards
from agentsgym.tokenization import AgentSpan, EpisodeTokenizer, reply_as_rendered
from agentsgym.tokenization.incremental import base_messages
from agentsgym.trajectory import Episode, StepRecord, TokenSegment, rewards_array
from agentsgym.types import AgentAction, EpisodeContext, Message, Messages, StepResult
from agentsgym.worker_pool import WorkerPool

if TYPE_CHECKING:
    from agentsgym.engine.playable import PlayableEnv

logger = logging.getLogger(__name__)

SERVER_PROMPT_MISMATCH_KEY = "server_prompt_mismatch"
"""Step info key: the server's prompt ids differed from the stream (a new segment starts)."""


class _Abandoned(Exception):
    """A turn that outlived its budget came back; nothing more of it is recorded."""


class EpisodeRun:
    """The state of one episode being played."""

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
        self.runtime = runtime
        self.episode = Episode(
            session_id=session_id,
            env_id=env.env_id,
            task_data=env.sessions[session_id],
            tokenized=env.chat is not None,
        )
        self.toolbox: Any = None  # the first turn asks the env (its code: it may fail)
        self.tools: tuple[dict[str, Any], ...] = ()
        self.tokens: EpisodeTokenizer | None = None
        self.spans: list[AgentSpan] = []
        self.state: Any = None
        self.phase = "initialize_episode"
        self.abandoned = False
        self.finalised = False

    async def play(self) -> Episode:
        config = self.env.config
        try:
            await asyncio.wait_for(self._play_turns(), config.episode_timeout_seconds)
        except asyncio.TimeoutError:
            self.abandoned = True
            self._fail(
                EpisodeTimeoutError(
                    f"the episode did not finish within episode_timeout_seconds="
                    f"{config.episode_timeout_seconds:g} (it was in {self.phase}); raise the "
                    "budget with --env-config episode_timeout_seconds=N"
                )
            )
        self.episode.agent_state = self.agent_state
        await self._finish()
        return self.episode

    async def _play_turns(self) -> None:
        try:
            await self.runtime.turn(self._first_turn, lambda: self.phase)
            for step in range(self.env.config.max_steps_per_episode):
                self.phase = "the agent"
                prompt_ids: list[int] | None = None
                if self.tokens is not None and self.caller.token_in:
                    prompt_ids = self.tokens.prompt_token_ids()
                action, self.agent_state = await self.caller.act(
                    self.episode.messages,
                    self.agent_state,
                    prompt_token_ids=prompt_ids,
                    context=self._context(step) if self.caller.takes_context else None,
                    pool=self.runtime.pool,
                )
                if self.toolbox is not None:  # on the loop: a sync env's turn never waits
                    self.phase = "the tools"
                answered = await self.toolbox.respond(action) if self.toolbox else None
                turn = partial(self._step_turn, step, action, answered)
                done = await self.runtime.turn(turn, lambda: self.phase)
                if done:
                    return
        except Exception as exc:  # noqa: BLE001 - recorded: one bad episode must not sink a batch
            if isinstance(exc, EpisodeTimeoutError):
                self.abandoned = True
            self._fail(exc)

    def _context(self, step: int) -> EpisodeContext:
        c = self.context
        return EpisodeContext(
            c.session_id, c.env_id, c.task_index, c.rollout_index, c.episode_index, c.seed, step,
            self.tools,
        )  # fmt: skip

    def _fail(self, exc: BaseException) -> None:
        if self.episode.error is None:
            self.episode.error = redact_text(f"{type(exc).__name__}: {exc}")
            logger.debug(
                "episode %s of %s failed: %s",
                self.episode.session_id, self.env.env_id, self.episode.error,
            )

    async def _hook(self, name: str, **kwargs: Any) -> Any:
        if self.abandoned:
            raise _Abandoned
        self.phase = name
        result = await self.runtime.call(name, **kwargs)
        if self.abandoned:
            raise _Abandoned
        return result

    async def _first_turn(self) -> None:
        self.toolbox = self.env.episode_tools(self.episode.task_data)
        self.tools = tuple(self.toolbox.schemas) if self.toolbox else ()
        if self.env.chat is not None:
            chat = self.env.chat.with_tools(self.tools) if self.tools else self.env.chat
            self.tokens = EpisodeTokenizer(chat, self.env.config.on_template_mismatch)
        self.state = await self._hook(
            "initialize_episode",
            session_id=self.episode.session_id,
            task_data=self.episode.task_data,
        )
        if self.state is None:
            raise EpisodeError(
                f"{type(self.env).__name__}: no initialize_episode implementation returned a state"
            )
        await self._prompt(0)

    async def _prompt(self, step: int) -> None:
        prompt = await self._hook("format_prompt", state=self.state, step=step)
        await self._add_env_messages(as_messages(prompt, self.env))

    async def _add_env_messages(self, new_messages: Messages) -> None:
        self.episode.messages.extend(new_messages)
        if self.tokens is not None:
            self.phase = "tokenizing the env turn"
            await self.runtime.cpu(self.tokens.add_env_turn, self.episode.messages, new_messages)

    async def _step_turn(self, step: int, action: AgentAction, answered: Any = None) -> bool:
        """Apply an action; prompt for the next one unless the episode ended."""
        if self.abandoned:
            raise _Abandoned
        message = Message(role="assistant", content=action.text)
        if action.tool_calls:
            message["tool_calls"] = action.tool_calls
        self.episode.messages.append(message)
        span = None
        if self.tokens is not None:
            self.phase = "tokenizing the agent turn"
            segments_before = len(self.tokens.segments)
            span = await self.runtime.cpu(
                self.tokens.add_agent_turn, _as_written(self.tokens.chat, action, answered),
                token_in=self.caller.token_in,
            )  # fmt: skip
            if action.prompt_token_ids is not None and len(self.tokens.segments) > segments_before:
                action.info = {**action.info, SERVER_PROMPT_MISMATCH_KEY: True}
        if answered is not None:  # a tool turn: its results are the next prompt
            self.episode.messages[-1] = reply = answered[0]  # its calls, parsed
            calls = len(reply.get("tool_calls") or ())  # 0: calls it made that could not be read
            result = StepResult(self.state, 0.0, False, {"tool_calls": calls})
            terms: dict[str, float] = {}
        else:
            hook_args = {"state": self.state, "action": action.text, "step": step, "reply": action}
            result = as_step_result(await self._hook("step_episode", **hook_args), self.env)
            terms = collect_terms(
                await self._hook("reward_shaping", step_result=result, **hook_args)
            )
        info = {**action.info, **result.info} if action.info else dict(result.info)
        source = span.token_source if span is not None else None
        if source is not None:
            info["token_source"] = source
        if action.truncated:
            info["reply_truncated"] = True
        token_span = None
        if span is not None and span.positions:
            token_span = (span.segment, span.positions[0], span.positions[-1] + 1)
        self.episode.steps.append(
            StepRecord(
                action=action.text,
                reward=result.reward + sum(terms.values()),
                done=result.done,
                info=info,
                reward_terms=terms,
                num_agent_tokens=len(span.positions) if span else 0,
                token_source=source,
                token_span=token_span,
                reply_truncated=action.truncated,
            )
        )
        if span is not None:
            self.spans.append(span)
        self.state = result.state
        if result.done:
            return True
        if step + 1 >= self.env.config.max_steps_per_episode:
            self.episode.truncated = True
            return True
        await (self._add_env_messages(answered[1]) if answered else self._prompt(step + 1))
        return False

    async def _finish(self) -> None:
        """finish_episode, the closing template tokens, rewards and checks."""
        try:
            await self.runtime.turn(self._finish_turn, lambda: "finish_episode")
        except Exception as exc:  # noqa: BLE001 - logged and recorded on the episode
            logger.warning(
                "finish_episode of %s failed: %s: %s", self.env.env_id, type(exc).__name__, exc
            )
            self._fail(EpisodeError(f"finish_episode: {type(exc).__name__}: {exc}"))
        if not self.finalised:
            try:
                self._finalise()
            except Exception as exc:  # noqa: BLE001 - recorded on the episode
                self._fail(exc)

    async def _finish_turn(self) -> None:
        # Its own turn and budget; not through _hook, which stops an abandoned episode's turns.
        episode = self.episode
        self.phase = "finish_episode"
        terms = collect_terms(await self.runtime.call(
            "finish_episode", state=self.state, truncated=episode.truncated, error=episode.error,
            session_id=episode.session_id,
        ))  # fmt: skip
        if terms and episode.error is None and episode.steps:
            last = episode.steps[-1]
            for name, value in terms.items():
                last.reward_terms[name] = last.reward_terms.get(name, 0.0) + value
            last.reward += sum(terms.values())
        if self.tokens is not None and episode.error is None:
            self.phase = "tokenizing the end of the episode"
            await self.runtime.cpu(self.tokens.finish, episode.messages)
        await self.runtime.cpu(self._finalise)

    def _finalise(self) -> None:
        self.finalised = True
        episode = self.episode
        step_rewards = [s.reward for s in episode.steps]
        episode.final_reward = float(sum(step_rewards))
        metrics: dict[str, float] = {"turns": float(len(episode.steps))}
        for step in episode.steps:
            for name, value in step.reward_terms.items():
                metrics[f"reward/{name}"] = metrics.get(f"reward/{name}", 0.0) + value
        metrics["reward/env"] = episode.final_reward - sum(
            v for k, v in metrics.items() if k.startswith("reward/")
        )
        episode.metrics = metrics
        tokens = self.tokens
        if tokens is None:
            return
        has_logprobs = episode.has_logprobs = tokens.has_logprobs and bool(self.spans)
        episode.segments = [TokenSegment.from_builder(b, has_logprobs) for b in tokens.segments]
        episode.segment_rewards = [
            rewards_array(r)
            for r in assign_token_rewards(
                self.env.config.reward_strategy,
                self.spans[: len(step_rewards)],
                step_rewards,
                episode.final_reward,
                [len(s) for s in tokens.segments],
            )
        ]
        if episode.ok:
            try:
                episode.check()
            except Exception as exc:  # noqa: BLE001 - logged and recorded on the episode
                episode.error = redact_text(f"{type(exc).__name__}: {exc}")
                logger.error("episode %s broke a token invariant: %s", episode.session_id, exc)


def _as_written(chat: Any, action: AgentAction, answered: Any) -> AgentAction:
    """A reply of calls a chat server parsed, without ids: tokenized as the template writes them."""
    if answered is None or action.token_ids is not None or not action.tool_calls:
        return action
    written = reply_as_rendered(chat, base_messages(False), *answered)
    return action if written is None else dataclasses.replace(action, text=written)


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
