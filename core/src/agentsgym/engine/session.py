"""EpisodeSession: one episode, played turn by turn, whoever drives it.

::

    session = EpisodeSession(env, session_id, task_data, runtime=runtime)
    prompt = await session.start()        # the first prompt (messages)
    outcome = await session.step(action)  # TurnOutcome: reward, terms, done, truncated,
                                          # info, tool results, and the next prompt
    closed = await session.finish()       # finish_episode's terms settled; the Episode

The local engine drives it with an agent (:mod:`agentsgym.engine.episode`); ``agentsgym
serve`` drives it with a remote client's replies. A driver is whatever has the next
action: nothing here assumes an :class:`~agentsgym.agents.Agent`. Decided here, once,
for every driver:

* tool turns: a reply whose calls the env's toolbox (``env.episode_tools``) answers
  gets the tool results as its next prompt, and reaches neither ``step_episode`` nor
  ``reward_shaping``;
* truncation at ``max_steps_per_episode`` (tool turns count);
* hook budgets: each env turn (the hooks between two actions, plus tokenizing) runs
  through :class:`~agentsgym.engine.hook_runtime.HookRuntime`, within
  ``hook_timeout_seconds``;
* the reward terms of ``reward_shaping`` and ``finish_episode``, and the
  :class:`~agentsgym.trajectory.Episode` record, with its tokens when the env has a
  tokenizer (none when it has none, as on the server).

A failure in ``start`` or ``step`` is recorded on the episode (``episode.error``) and
raised again, so that the driver stops: one bad episode never sinks a batch. A driver
records its own failures (the agent's) with :meth:`EpisodeSession.fail`. ``finish``
never raises and runs ``finish_episode`` once, however the episode ended.

An env that declares roles (``MultistepEnv.roles``: a game's seats) has one *view* per
role: its own conversation, token stream (with its own chat template when the role's
model differs) and steps, recorded as an :class:`~agentsgym.trajectory.Episode` of its
own (``episode.role``). ``turn_role`` says whose turn it is before every prompt;
:attr:`EpisodeSession.role` names it, and :attr:`messages`, :meth:`prompt_token_ids`
and :attr:`episode` are that role's. The state and the hooks are shared; ``finish``
settles ``role_rewards`` on each role's last action and closes every view
(``FinishedEpisode.episodes``). An env without roles has one view, role ``None``.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from agentsgym.engine.episode_record import close_record
from agentsgym.engine.hook_results import as_messages, as_step_result, collect_terms
from agentsgym.engine.role_views import RoleView, check_turn_role, role_reward_values
from agentsgym.errors import EpisodeError, EpisodeTimeoutError
from agentsgym.redaction import redact_text
from agentsgym.tokenization import AgentSpan, EpisodeTokenizer, reply_as_rendered
from agentsgym.tokenization.incremental import base_messages
from agentsgym.trajectory import Episode, StepRecord
from agentsgym.types import AgentAction, Message, Messages, StepResult

if TYPE_CHECKING:
    from agentsgym.engine.hook_runtime import HookRuntime
    from agentsgym.engine.playable import PlayableEnv

logger = logging.getLogger(__name__)

SERVER_PROMPT_MISMATCH_KEY = "server_prompt_mismatch"
"""Step info key: the server's prompt ids differed from the stream (a new segment starts)."""

TOOL_CALLS_KEY = "tool_calls"
"""Step info key of a tool turn: how many calls of the reply were read (0: it tried to
call a tool, and the call could not be read; the model was told why)."""


class _Abandoned(Exception):
    """A turn that outlived its budget came back; nothing more of it is recorded."""


@dataclass(slots=True)
class TurnOutcome:
    """What one step did, and the next prompt.

    ``reward`` is the env's own step reward, ``terms`` the ``reward_shaping`` terms (the
    step's whole reward is ``record.reward``, where ``finish`` adds its terms on the
    last step); ``info`` is the env's (for a tool turn,
    ``{"tool_calls": n}``). ``messages`` are the new messages of the next prompt, empty
    once the episode is over. ``tool_results`` are the tool messages of a tool turn
    (``None`` otherwise). ``record`` is the step as the episode records it.
    """

    reward: float
    terms: dict[str, float]
    done: bool
    truncated: bool
    info: dict[str, Any]
    messages: Messages
    tool_results: Messages | None
    record: StepRecord
    role: str | None = None

    @property
    def over(self) -> bool:
        """The episode ended on this step (the env said so, or the step limit)."""
        return self.done or self.truncated


@dataclass(frozen=True, slots=True)
class FinishedEpisode:
    """The closing state: ``finish_episode``'s terms (already added to the last step's
    reward when the episode had no error) and the finished episode record. ``error`` is
    ``finish_episode``'s own failure, if it failed (it is on the episode too)."""

    episode: Episode
    terms: dict[str, float]
    error: str | None = None
    episodes: tuple[Episode, ...] = ()
    """Every role's episode, in the env's role order (``(episode,)`` without roles)."""


class EpisodeSession:
    """One episode of ``task_data`` on ``env`` (see the module docstring).

    :param session_id: the id the env's hooks see.
    :param runtime: how the env's hooks are called (one per env and run).
    :param token_in: the driver's actions come from a model conditioned on this
        episode's own prompt ids (:meth:`prompt_token_ids`): their ids are ``sampled``.
        With roles, a dict by role name (a role not in it: ``False``).
    """

    def __init__(
        self,
        env: PlayableEnv,
        session_id: str,
        task_data: dict[str, Any],
        *,
        runtime: HookRuntime,
        token_in: bool | dict[str, bool] = False,
    ) -> None:
        self.env = env
        self.runtime = runtime
        self.token_in = token_in
        self.roles: tuple[str, ...] = tuple(getattr(env, "role_names", ()))
        role_chats = getattr(env, "role_chats", {})
        self.views = {
            role: RoleView.new(env, session_id, task_data, role, role_chats.get(role, env.chat))
            for role in (self.roles or (None,))
        }
        self.role: str | None = None
        """The role whose turn it is (``None`` without roles, or before the first prompt)."""
        self._last_role: str | None = None
        self._turns = 0
        self.toolbox: Any = None  # start asks the env (its code: it may fail)
        self.tools: tuple[dict[str, Any], ...] = ()
        self._tools_see_state = False  # the toolbox's respond takes state=
        self.episode: Episode
        self.tokens: EpisodeTokenizer | None
        self.spans: list[AgentSpan]
        self._show_first_view()
        self.state: Any = None
        self.done = False
        self.phase = "initialize_episode"
        """What the episode is doing now: a hook's name, "the tools", ... (a driver names
        its own waits, "the agent"), for the messages of timeouts."""
        self.abandoned = False
        self.started = False
        self._finished: FinishedEpisode | None = None
        self._finalised = False

    # ------------------------------------------------------------------ what a driver reads
    @property
    def messages(self) -> Messages:
        """The whole conversation so far (the episode's record: do not change it)."""
        return self.episode.messages

    @property
    def steps_taken(self) -> int:
        """Actions applied so far, by every role; the index of the next step."""
        return self._turns

    def _switch_to(self, role: str | None) -> None:
        """Make ``role``'s view the current one: its episode, tokens and agent spans."""
        view = self.views[role]
        self.role = role
        self.episode, self.tokens, self.spans = view.episode, view.tokens, view.spans

    def _show_first_view(self) -> None:
        """The first role's view is the current one before anyone's turn (role None)."""
        self._switch_to(self.roles[0] if self.roles else None)
        self.role = None

    @property
    def truncated(self) -> bool:
        """The step limit (or the driver, at finish) ended the episode."""
        return self.episode.truncated

    @property
    def over(self) -> bool:
        """No step may follow: the episode ended, failed or was finished."""
        return (
            self.done
            or self.episode.truncated
            or self.episode.error is not None
            or self._finished is not None
        )

    @property
    def finished(self) -> bool:
        """``finish`` ran (``finish_episode`` is never called twice)."""
        return self._finished is not None

    def prompt_token_ids(self) -> list[int] | None:
        """The ids of the prompt the next action answers (``None`` without a tokenizer)."""
        return self.tokens.prompt_token_ids() if self.tokens is not None else None

    def describe(self) -> str:
        """What the episode is doing now (``phase``), for a timeout's message."""
        return self.phase

    # ------------------------------------------------------------------ start, step, fail
    async def start(self) -> Messages:
        """``initialize_episode`` and the first prompt (a new list of its messages)."""
        if self.started:
            raise EpisodeError(
                f"episode {self.episode.session_id} was started already; a new episode "
                "needs a new EpisodeSession"
            )
        self.started = True
        try:
            await self.runtime.turn(self._first_turn, self.describe)
        except Exception as exc:
            self.fail(exc)
            raise
        return list(self.episode.messages)

    async def step(self, action: AgentAction, *, role: str | None = None) -> TurnOutcome:
        """Apply one action: a tool turn if the env's toolbox answers its calls, else
        ``step_episode`` and ``reward_shaping``; then the next prompt unless it ended.
        ``role``: who acts (``None``: whoever's turn it is); in an env with roles another
        role's action is an error, and the episode goes on (without roles it is only a
        label, carried on the outcome)."""
        if not self.started or self.over:
            state = "was not started" if not self.started else "is over"
            raise EpisodeError(
                f"episode {self.episode.session_id} {state}: start a session before stepping "
                "it, and stop at the step whose outcome is over"
            )
        if self.roles and role is not None and role != self.role:
            raise EpisodeError(
                f"episode {self.episode.session_id}: an action of role {role!r}, but it is "
                f"{self.role!r}'s turn (session.role); play the role whose turn it is"
            )
        if self.roles:
            role = self.role
        try:
            answered = None
            if self.toolbox is not None:  # on the loop: a sync env's turn never waits
                self.phase = "the tools"
                episode = {"state": self.state} if self._tools_see_state else {}
                answered = await self.toolbox.respond(action, **episode)
            turn = partial(self._step_turn, self.steps_taken, action, answered, role)
            return await self.runtime.turn(turn, self.describe)
        except Exception as exc:
            self.fail(exc)
            raise

    def fail(self, error: BaseException | str) -> None:
        """Record a failure on the episode (the first one wins); a timeout also abandons
        the turn still running, so that nothing it does later reaches the episode."""
        if isinstance(error, EpisodeTimeoutError):
            self.abandoned = True
        if self.episode.error is None:
            text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
            self.episode.error = redact_text(text)
            logger.debug(
                "episode %s of %s failed: %s",
                self.episode.session_id,
                self.env.env_id,
                self.episode.error,
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
        self.toolbox = self.env.episode_tools(self.episode.task_data)
        self.tools = tuple(self.toolbox.schemas) if self.toolbox else ()
        self._tools_see_state = self.toolbox is not None and _takes_state(self.toolbox)
        for view in self.views.values():
            if view.chat is not None:
                chat = view.chat.with_tools(self.tools) if self.tools else view.chat
                view.tokens = EpisodeTokenizer(chat, self.env.config.on_template_mismatch)
        self._show_first_view()  # now with its token stream
        self.state = await self._hook(
            "initialize_episode",
            session_id=self.episode.session_id,
            task_data=self.episode.task_data,
        )
        self._live()
        if self.state is None:
            raise EpisodeError(
                f"{type(self.env).__name__}: no initialize_episode implementation returned a state"
            )
        await self._prompt(0)

    async def _prompt(self, step: int) -> Messages:
        if self.roles:
            named = await self._hook("turn_role", state=self.state, step=step)
            self._live()
            self._switch_to(check_turn_role(named, self.roles, self.env))
        prompt = await self._hook("format_prompt", state=self.state, step=step, role=self.role)
        self._live()
        return await self._add_env_messages(as_messages(prompt, self.env))

    async def _add_env_messages(self, new_messages: Messages) -> Messages:
        self.episode.messages.extend(new_messages)
        if self.tokens is not None:
            self.phase = "tokenizing the env turn"
            await self.runtime.cpu(self.tokens.add_env_turn, self.episode.messages, new_messages)
        return new_messages

    async def _step_turn(
        self, step: int, action: AgentAction, answered: Any, role: str | None
    ) -> TurnOutcome:
        """Apply an action; prompt for the next one unless the episode ended."""
        self._live()
        acting = self.role  # None without roles, whatever label the driver gave
        self._last_role = acting
        message: Message = {"role": "assistant", "content": action.text}
        if action.tool_calls:
            message["tool_calls"] = action.tool_calls
        self.episode.messages.append(message)
        span = None
        if self.tokens is not None:
            self.phase = "tokenizing the agent turn"
            segments_before = len(self.tokens.segments)
            span = await self.runtime.cpu(
                self.tokens.add_agent_turn,
                _as_written(self.tokens.chat, action, answered),
                token_in=self._token_in(acting),
            )
            if action.prompt_token_ids is not None and len(self.tokens.segments) > segments_before:
                action.info = {**action.info, SERVER_PROMPT_MISMATCH_KEY: True}
        tool_results: Messages | None = None
        if answered is not None:  # a tool turn: its results are the next prompt
            self.episode.messages[-1] = reply = answered[0]  # its calls, parsed
            tool_results = answered[1]
            calls = len(reply.get("tool_calls") or ())  # 0: calls it made that could not be read
            result = StepResult(self.state, 0.0, False, {TOOL_CALLS_KEY: calls})
            terms: dict[str, float] = {}
        else:
            hook_args = {
                "state": self.state,
                "action": action.text,
                "step": step,
                "reply": action,
                "role": acting,
            }
            returned = await self._hook("step_episode", **hook_args)
            self._live()
            result = as_step_result(returned, self.env)
            shaped = await self._hook("reward_shaping", step_result=result, **hook_args)
            self._live()
            terms = collect_terms(shaped)
        info = {**action.info, **result.info} if action.info else dict(result.info)
        source = span.token_source if span is not None else None
        if source is not None:
            info["token_source"] = source
        if action.truncated:
            info["reply_truncated"] = True
        token_span = None
        if span is not None and span.positions:
            token_span = (span.segment, span.positions[0], span.positions[-1] + 1)
        record = StepRecord(
            action=action.text,
            reward=result.reward + sum(terms.values()),
            done=result.done,
            info=info,
            reward_terms=terms,
            num_agent_tokens=len(span.positions) if span else 0,
            token_source=source,
            token_span=token_span,
            reply_truncated=action.truncated,
            policy_version=action.policy_version,
            policy_versions=action.policy_versions,
        )
        self.episode.steps.append(record)
        self._turns += 1
        if span is not None:
            self.spans.append(span)
        self.state = result.state
        outcome = TurnOutcome(
            result.reward,
            terms,
            result.done,
            False,
            result.info,
            [],
            tool_results,
            record,
            role,
        )
        if result.done:
            self.done = True
        elif step + 1 >= self.env.config.max_steps_per_episode:
            self.episode.truncated = outcome.truncated = True
        elif tool_results is not None:
            outcome.messages = await self._add_env_messages(tool_results)
        else:
            outcome.messages = await self._prompt(step + 1)
        return outcome

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
            self.episode.truncated = True
        self._share_outcome()
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
            self.fail(EpisodeError(finish_error))
        if not self._finalised:
            try:
                self._finalise()
            except Exception as exc:  # noqa: BLE001 - recorded on the episode
                self.fail(exc)
        self._share_outcome()
        episodes = tuple(view.episode for view in self.views.values())
        self._finished = FinishedEpisode(self.episode, terms, finish_error, episodes)
        return self._finished

    def _share_outcome(self) -> None:
        """One game, one outcome: the first error and a truncation hold for every role."""
        if len(self.views) < 2:
            return
        episodes = [view.episode for view in self.views.values()]
        first_error = next((e.error for e in episodes if e.error is not None), None)
        truncated = any(e.truncated for e in episodes)
        for episode in episodes:
            episode.error = episode.error or first_error
            episode.truncated = truncated

    async def _finish_turn(self, error: str | None) -> dict[str, float]:
        # Its own turn and budget; not through _hook, which stops an abandoned episode's turns.
        episode = self.views[self._last_role].episode if self._turns else self.episode
        self.phase = "finish_episode"
        results = await self.runtime.call(
            "finish_episode",
            state=self.state,
            truncated=episode.truncated,
            error=episode.error if error is None else error,
            session_id=episode.session_id,
        )
        terms = collect_terms(results)
        if terms and episode.error is None and episode.steps:
            _settle(episode.steps[-1], terms)
        if self.roles and episode.error is None:
            self.phase = "role_rewards"
            returned = await self.runtime.call(
                "role_rewards", state=self.state, truncated=episode.truncated, error=None
            )
            for role, value in role_reward_values(returned, self.roles, self.env).items():
                view = self.views[role]
                view.outcome = value
                if view.episode.steps:
                    _settle(view.episode.steps[-1], {"outcome": value})
        for view in self.views.values():
            if view.tokens is not None and episode.error is None and view.episode.messages:
                self.phase = "tokenizing the end of the episode"
                await self.runtime.cpu(view.tokens.finish, view.episode.messages)
        await self.runtime.cpu(self._finalise)
        return terms

    def _finalise(self) -> None:
        self._finalised = True
        for view in self.views.values():
            close_record(view, self.env.config.reward_strategy)

    def _token_in(self, role: str | None) -> bool:
        if isinstance(self.token_in, dict):
            return bool(self.token_in.get(role or "", False))
        return self.token_in


def _settle(step: StepRecord, terms: dict[str, float]) -> None:
    """Add closing reward terms to a step (a new dict: the step's outcome keeps its own)."""
    settled = dict(step.reward_terms)
    for name, value in terms.items():
        settled[name] = settled.get(name, 0.0) + value
    step.reward_terms = settled
    step.reward += sum(terms.values())


def _as_written(chat: Any, action: AgentAction, answered: Any) -> AgentAction:
    """A reply of calls a chat server parsed, without ids: tokenized as the template writes them."""
    if answered is None or action.token_ids is not None or not action.tool_calls:
        return action
    written = reply_as_rendered(chat, base_messages(False), *answered)
    return action if written is None else dataclasses.replace(action, text=written)


def _takes_state(toolbox: Any) -> bool:
    """Whether ``toolbox.respond`` accepts ``state=`` (the episode's current state, for
    the tools' context); a hand-written toolbox of the bare protocol, ``respond(action)``,
    is called without it."""
    try:
        parameters = inspect.signature(toolbox.respond).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a builtin): the bare protocol
        return False
    return any(
        (p.name == "state" and p.kind is not p.POSITIONAL_ONLY) or p.kind is p.VAR_KEYWORD
        for p in parameters
    )
