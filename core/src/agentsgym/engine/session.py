"""EpisodeSession: one episode, played turn by turn through the env's hooks, whoever
drives it.

::

    session = EpisodeSession(env, session_id, task_data, runtime=runtime)
    prompt = await session.start()        # the first prompt (messages)
    outcome = await session.step(action)  # TurnOutcome: reward, terms, done, truncated,
                                          # info, tool results, and the next prompt
    closed = await session.finish()       # finish_episode's terms settled; the Episodes

A driver is whatever has the next action: the local engine and ``agentsgym serve``
drive it with agents (:func:`agentsgym.engine.play.play_until`), a server with a remote
client's replies, the TRL bridge with TRL's. Decided here, once, for every driver:

* tool turns (:mod:`agentsgym.engine.tool_turns`);
* truncation at ``max_steps_per_episode`` (tool turns count), or where the env's step
  says it cut the episode short (``info["truncated"]``: a remote server's limit);
* hook budgets: each env turn (the hooks between two actions, plus tokenizing) runs
  through :class:`~agentsgym.engine.hook_runtime.HookRuntime`, within
  ``hook_timeout_seconds``;
* the reward terms of ``reward_shaping`` and ``finish_episode``.

What happened is recorded by the episode's :class:`~agentsgym.engine.recorder.EpisodeRecorder`
(``session.recorder``): its views, tokens (when the env has a tokenizer) and steps.

A failure in ``start`` or ``step`` is recorded on the episode and raised again, so that
the driver stops: one bad episode never sinks a batch. A driver records its own
failures (the agent's) with :meth:`EpisodeSession.fail`. ``finish`` never raises and
runs ``finish_episode`` once, however the episode ended.

In an env that declares roles (``env.roles``: a game's seats) ``turn_role`` says whose
turn it is before every prompt (:attr:`EpisodeSession.role`); each role has its own view
(:meth:`EpisodeSession.view`). The state and the hooks are shared; ``finish`` settles
``role_rewards`` on each role's last action.
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any

from agentsgym.engine.hook_results import (
    as_messages,
    as_step_result,
    check_turn_role,
    collect_terms,
    role_reward_values,
)
from agentsgym.engine.outcomes import FinishedEpisode, TurnOutcome
from agentsgym.engine.recorder import EpisodeRecorder, RoleView
from agentsgym.engine.tool_turns import (
    Answered,
    EpisodeTools,
    as_written,
    episode_toolbox,
    tool_turn_info,
)
from agentsgym.errors import EpisodeError, EpisodeTimeoutError, RewardUnavailableError
from agentsgym.types import TRUNCATED_KEY, AgentAction, Messages, StepResult

if TYPE_CHECKING:
    from agentsgym.engine.hook_runtime import HookRuntime
    from agentsgym.engine.playable import PlayableEnv
    from agentsgym.tokenization import AgentSpan

logger = logging.getLogger(__name__)


class _Abandoned(Exception):
    """A turn that outlived its budget came back; nothing more of it is recorded."""


class EpisodeSession:
    """One episode of ``task_data`` on ``env`` (see the module docstring).

    :param session_id: the id the env's hooks see.
    :param runtime: how the env's hooks are called (one per env and run).
    :param token_in: the roles whose actions come from a model conditioned on their
        view's own prompt ids (:meth:`RoleView.prompt_token_ids`): their ids are
        ``sampled`` (``None`` names the only agent of an env without roles).
    :param tokenize: record token streams when the env has a tokenizer (``False``: its
        driver tokenizes, as TRL does; messages and rewards only).
    :param rollout_seed: the seed of this rollout's agents (``EpisodeContext.seed``),
        which ``initialize_episode`` is given for agents the env plays itself (a
        server's opponents).
    """

    def __init__(
        self,
        env: PlayableEnv,
        session_id: str,
        task_data: dict[str, Any],
        *,
        runtime: HookRuntime,
        token_in: frozenset[str | None] = frozenset(),
        tokenize: bool = True,
        rollout_seed: int = 0,
    ) -> None:
        self.env = env
        self.runtime = runtime
        self.token_in = token_in
        self.task_data = task_data
        self.rollout_seed = rollout_seed
        self.recorder = EpisodeRecorder.for_env(env, session_id, task_data, tokenize=tokenize)
        self.roles = self.recorder.roles
        self.role: str | None = None
        """The role whose turn it is (``None`` without roles, or before the first prompt)."""
        self._last_role: str | None = self.roles[0] if self.roles else None
        self._turns = 0
        self.toolbox: EpisodeTools | None = None  # start asks the env (its code: it may fail)
        self.state: Any = None
        self.done = False
        self.phase = "initialize_episode"
        """What the episode is doing now: a hook's name, "the tools", ... (a driver names
        its own waits, "the agent"), for the messages of timeouts."""
        self.abandoned = False
        self.started = False
        self._finished: FinishedEpisode | None = None

    # ------------------------------------------------------------------ what a driver reads
    def view(self, role: str | None = None) -> RoleView:
        """The view of ``role``: its conversation, prompt ids and record (``None``: the
        only view of an env without roles)."""
        return self.recorder.view(role)

    @property
    def session_id(self) -> str:
        return self.recorder.session_id

    @property
    def tools(self) -> tuple[dict[str, Any], ...]:
        """The episode's tool schemas (empty without tools)."""
        return self.toolbox.schemas if self.toolbox is not None else ()

    @property
    def steps_taken(self) -> int:
        """Actions applied so far, by every role; the index of the next step."""
        return self._turns

    @property
    def truncated(self) -> bool:
        """The step limit (or the driver, at finish) ended the episode."""
        return self.recorder.truncated

    @property
    def over(self) -> bool:
        """No step may follow: the episode ended, failed or was finished."""
        recorder = self.recorder
        return (
            self.done
            or recorder.truncated
            or recorder.error is not None
            or self._finished is not None
        )

    @property
    def finished(self) -> bool:
        """``finish`` ran (``finish_episode`` is never called twice)."""
        return self._finished is not None

    def describe(self) -> str:
        """What the episode is doing now (``phase``), for a timeout's message."""
        return self.phase

    # ------------------------------------------------------------------ start, step, fail
    async def start(self) -> Messages:
        """``initialize_episode`` and the first prompt (a new list of its messages)."""
        if self.started:
            raise EpisodeError(
                f"episode {self.session_id} was started already; a new episode needs a new "
                "EpisodeSession"
            )
        self.started = True
        try:
            await self.runtime.turn(self._first_turn, self.describe)
        except Exception as exc:
            self.fail(exc)
            raise
        return list(self.view(self.role).messages)

    async def step(self, action: AgentAction, *, role: str | None = None) -> TurnOutcome:
        """Apply one action of the role whose turn it is: a tool turn if the env's
        toolbox answers its calls, else ``step_episode`` and ``reward_shaping``; then the
        next prompt unless the episode ended. ``role``: the role that acts, checked
        against whose turn it is (``None``: whoever's turn it is); an env without roles
        has none to name."""
        if not self.started or self.over or (role is not None and role != self.role):
            self._refuse(role)
        try:
            answered = None
            if self.toolbox is not None:  # on the loop: a sync env's turn never waits
                self.phase = "the tools"
                answered = await self.toolbox.answer(action, self.state, self.session_id)
            turn = partial(self._step_turn, self._turns, action, answered)
            return await self.runtime.turn(turn, self.describe)
        except Exception as exc:
            self.fail(exc)
            raise

    def _refuse(self, role: str | None) -> None:
        """Why an action cannot be applied now (an EpisodeError; the episode goes on)."""
        if not self.started or self.over:
            state = "was not started" if not self.started else "is over"
            raise EpisodeError(
                f"episode {self.session_id} {state}: start a session before stepping it, and "
                "stop at the step whose outcome is over"
            )
        if not self.roles:
            raise EpisodeError(
                f"episode {self.session_id}: an action of role {role!r}, but "
                f"{type(self.env).__name__} has no roles; leave role out"
            )
        raise EpisodeError(
            f"episode {self.session_id}: an action of role {role!r}, but it is "
            f"{self.role!r}'s turn (session.role); play the role whose turn it is"
        )

    def fail(self, error: BaseException | str) -> None:
        """Record a failure on the episode (the first one wins); a timeout also abandons
        the turn still running, so that nothing it does later reaches the episode."""
        if isinstance(error, EpisodeTimeoutError):
            self.abandoned = True
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        if self.recorder.fail(text):
            logger.debug(
                "episode %s of %s failed: %s", self.session_id, self.env.env_id, self.recorder.error
            )

    # ------------------------------------------------------------------ turns
    def _hook(self, name: str, **kwargs: Any) -> Coroutine[Any, Any, Any]:
        """The call of hook ``name``; await it, then :meth:`_live` (a plain function
        returning the call, not a coroutine: one frame less on every hook call)."""
        self._live()
        self.phase = name
        return self.runtime.call(name, **kwargs)

    def _live(self) -> None:
        """Stop a turn of an abandoned episode: nothing more of it is recorded."""
        if self.abandoned:
            raise _Abandoned

    async def _first_turn(self) -> None:
        toolbox = await episode_toolbox(self.env, self.task_data)
        self.toolbox = EpisodeTools(toolbox) if toolbox is not None else None
        self.recorder.open_streams(self.tools)
        self.state = await self._hook(
            "initialize_episode",
            session_id=self.session_id,
            task_data=self.task_data,
            rollout_seed=self.rollout_seed,
        )
        self._live()
        if self.state is None:
            raise EpisodeError(
                f"{type(self.env).__name__}: no initialize_episode implementation returned a state"
            )
        await self._prompt(0)

    async def _prompt(self, step: int) -> Messages:
        """The next prompt, to the role whose turn it is; its new messages."""
        if self.roles:
            named = await self._hook("turn_role", state=self.state, step=step)
            self._live()
            self.role = check_turn_role(named, self.roles, self.env)
        prompt = await self._hook("format_prompt", state=self.state, step=step, role=self.role)
        self._live()
        return await self._add_prompt(as_messages(prompt, self.env))

    async def _add_prompt(self, new_messages: Messages) -> Messages:
        if not self.recorder.tokenizes:
            return self.recorder.add_prompt(self.role, new_messages)
        self.phase = "tokenizing the env turn"
        return await self.runtime.cpu(self.recorder.add_prompt, self.role, new_messages)

    async def _step_turn(
        self, step: int, action: AgentAction, answered: Answered | None
    ) -> TurnOutcome:
        """Apply an action; prompt for the next one unless the episode ended. (The
        pieces are plain functions: a coroutine more on every step costs a microsecond.)"""
        self._live()
        self._last_role = self.role
        cut = False
        if self.recorder.tokenizes:
            self.phase = "tokenizing the agent turn"
            span = await self.runtime.cpu(self._add_reply, action, answered)
        else:
            span = self._add_reply(action, answered)
        if answered is None:  # the env's step and its reward terms
            hook_args = {
                "state": self.state,
                "action": action.text,
                "step": step,
                "reply": action,
                "role": self.role,
            }
            returned = await self._hook("step_episode", **hook_args)
            self._live()
            result = as_step_result(returned, self.env)
            if result.info.get(TRUNCATED_KEY) is True:  # the env cut the episode short
                cut = True  # recorded on the episode, as at the step limit, not in the info
                info = {k: v for k, v in result.info.items() if k != TRUNCATED_KEY}
                result = result._replace(info=info)
            shaped = await self._hook("reward_shaping", step_result=result, **hook_args)
            self._live()
            outcome = self._record(action, span, result, collect_terms(shaped), None)
        else:  # a tool turn: its results are the next prompt
            result = StepResult(self.state, 0.0, False, tool_turn_info(answered))
            outcome = self._record(action, span, result, {}, answered[1])
        if result.done:
            self.done = True
        elif cut or step + 1 >= self.env.config.max_steps_per_episode:
            self.recorder.truncate()
            outcome.truncated = True
        elif answered is not None:
            outcome.messages = await self._add_prompt(answered[1])
        else:
            outcome.messages = await self._prompt(step + 1)
        return outcome

    def _add_reply(self, action: AgentAction, answered: Answered | None) -> AgentSpan | None:
        """The reply to the role's view: a tool turn's as its toolbox parsed its calls."""
        view = self.recorder.views[self.role]
        written = None
        if answered is not None and view.tokens is not None:
            written = as_written(view.tokens.chat, action, answered)  # type: ignore[union-attr]
        return self.recorder.add_reply(
            self.role,
            action,
            token_in=self.role in self.token_in,
            message=None if answered is None else answered[0],
            written=written,
        )

    def _record(
        self,
        action: AgentAction,
        span: AgentSpan | None,
        result: StepResult,
        terms: dict[str, float],
        tool_results: Messages | None,
    ) -> TurnOutcome:
        """The step recorded, the state moved on: its outcome (without the next prompt)."""
        record = self.recorder.record_step(
            self.role,
            action,
            span,
            reward=result.reward,
            done=result.done,
            info=result.info,
            terms=terms,
        )
        self._turns += 1
        self.state = result.state
        return TurnOutcome(
            reward=result.reward,
            terms=terms,
            done=result.done,
            info=result.info,
            tool_results=tool_results,
            record=record,
            role=self.role,
        )

    # ------------------------------------------------------------------ finish
    async def finish(self, *, truncated: bool = False, error: str | None = None) -> FinishedEpisode:
        """``finish_episode``, the closing template tokens, rewards and checks; once
        (a second call returns the first one's result). Never raises.

        :param truncated: the driver ended the episode early (its own limit); the
            session's own truncation at the step limit counts either way.
        :param error: the driver's reason the episode ended badly (a client's error, a
            closed connection): recorded if the episode has none, and what
            ``finish_episode`` is told.
        """
        if self._finished is not None:
            return self._finished
        if error is not None:
            self.fail(error)
        if truncated:
            self.recorder.truncate()
        terms: dict[str, float] = {}
        finish_error = None
        try:
            terms = await self.runtime.turn(
                partial(self._finish_turn, error), lambda: "finish_episode"
            )
        except Exception as exc:  # noqa: BLE001 - logged and recorded on the episode
            logger.warning(
                "finish_episode of %s failed: %s: %s", self.env.env_id, type(exc).__name__, exc
            )
            finish_error = f"finish_episode: {type(exc).__name__}: {exc}"
            # A reward that could not be computed keeps its kind: the runs count it apart.
            unscored = isinstance(exc, RewardUnavailableError)
            self.fail(
                RewardUnavailableError(f"finish_episode: {exc}")
                if unscored
                else EpisodeError(finish_error)
            )
        try:
            episodes = self.recorder.close()
        except Exception as exc:  # noqa: BLE001 - recorded on the episode
            self.fail(exc)
            episodes = self.recorder.episodes
        self._finished = FinishedEpisode(episodes, terms, self.recorder.settled, finish_error)
        return self._finished

    async def _finish_turn(self, error: str | None) -> dict[str, float]:
        # Its own turn and budget; not through _hook, which stops an abandoned episode's turns.
        recorder = self.recorder
        self.phase = "finish_episode"
        results = await self.runtime.call(
            "finish_episode",
            state=self.state,
            truncated=recorder.truncated,
            error=recorder.error if error is None else error,
            session_id=self.session_id,
        )
        terms = collect_terms(results)
        if recorder.error is None:
            recorder.settle(self._last_role, terms)
        if self.roles and recorder.error is None:
            self.phase = "role_rewards"
            returned = await self.runtime.call(
                "role_rewards", state=self.state, truncated=recorder.truncated, error=None
            )
            for role, value in role_reward_values(returned, self.roles, self.env).items():
                recorder.views[role].outcome = value
                recorder.settle(role, {"outcome": value})
        if recorder.error is None:
            self.phase = "tokenizing the end of the episode"
            for view in recorder.views.values():
                if view.tokens is not None and view.messages:
                    await self.runtime.cpu(view.tokens.finish, view.messages)  # type: ignore[union-attr]
        await self.runtime.cpu(recorder.close)
        return terms
