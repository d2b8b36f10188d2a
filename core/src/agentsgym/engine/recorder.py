"""EpisodeRecorder: the record of one episode, whoever produces it.

Every producer of episodes records through this one object: the hook-stepping
protocol (:class:`~agentsgym.engine.session.EpisodeSession`, which the local engine,
``agentsgym serve`` and the TRL bridge drive) and producers that have only a model
server's calls (a model gateway). It keeps:

* one **view** per role (:class:`RoleView`; one view, role ``None``, without roles):
  the role's conversation, token stream and steps, recorded as an
  :class:`~agentsgym.trajectory.Episode` of its own;
* the **segments** of each view and where every action's tokens landed, with their
  **token source**: a chat stream built turn by turn (:meth:`add_prompt`,
  :meth:`add_reply`; a server whose prompt ids differ from the stream starts a new
  segment), or a model server's calls placed by their prompt ids (:meth:`record_call`);
* each step's **policy version**, carried from the action in one place
  (:meth:`EpisodeRecorder.record_step`);
* the **closing** of the record (:meth:`close`): final rewards, metrics, per-token
  rewards by the env's ``reward_strategy``, the token invariants.

One game has one outcome: an error (the first one wins) and a truncation hold for every
view.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentsgym.errors import EpisodeError
from agentsgym.redaction import redact_text
from agentsgym.rewards import assign_token_rewards
from agentsgym.tokenization import AgentSpan, EpisodeTokenizer
from agentsgym.tokenization.calls import CallStream
from agentsgym.trajectory import Episode, StepRecord, TokenSegment, rewards_array
from agentsgym.types import AgentAction, Message, Messages

if TYPE_CHECKING:
    from agentsgym.config import RewardStrategyName, TemplateMismatchPolicy
    from agentsgym.engine.playable import PlayableEnv
    from agentsgym.tokenization import ChatTokenizer

logger = logging.getLogger(__name__)

SERVER_PROMPT_MISMATCH_KEY = "server_prompt_mismatch"
"""Step info key: the server's prompt ids differed from the stream (a new segment starts)."""


@dataclass(slots=True)
class RoleView:
    """One role's side of an episode: its record, its chat template and token stream
    (``None`` without a tokenizer), where each of its actions' tokens landed, and what
    ``role_rewards`` gave it (kept in its metrics even when it never acted)."""

    episode: Episode
    chat: ChatTokenizer | None
    tokens: EpisodeTokenizer | CallStream | None = None
    spans: list[AgentSpan] = field(default_factory=list)
    outcome: float | None = None

    @property
    def role(self) -> str | None:
        return self.episode.role

    @property
    def messages(self) -> Messages:
        """The role's conversation so far (the record's: do not change it)."""
        return self.episode.messages

    @property
    def steps(self) -> list[StepRecord]:
        return self.episode.steps

    def prompt_token_ids(self) -> list[int] | None:
        """The ids of the prompt the role's next action answers (``None`` without a
        chat stream)."""
        tokens = self.tokens
        return tokens.prompt_token_ids() if isinstance(tokens, EpisodeTokenizer) else None


class EpisodeRecorder:
    """The record of one episode (see the module docstring).

    :param chats: the chat tokenizer of each role's view (``{None: chat}`` without
        roles; a ``None`` chat records no tokens).
    """

    def __init__(
        self,
        session_id: str,
        env_id: str,
        task_data: dict[str, Any],
        chats: Mapping[str | None, ChatTokenizer | None],
        *,
        reward_strategy: RewardStrategyName = "spread",
        on_template_mismatch: TemplateMismatchPolicy = "split",
    ) -> None:
        self.reward_strategy: RewardStrategyName = reward_strategy
        self.on_template_mismatch: TemplateMismatchPolicy = on_template_mismatch
        self.views: dict[str | None, RoleView] = {
            role: RoleView(
                Episode(
                    session_id=session_id,
                    env_id=env_id,
                    task_data=task_data,
                    tokenized=chat is not None,
                    role=role,
                ),
                chat,
            )
            for role, chat in chats.items()
        }
        self.roles: tuple[str, ...] = tuple(r for r in self.views if r is not None)
        """The roles' names, in the env's order (empty: one agent)."""
        self.tokenizes = any(chat is not None for chat in chats.values())
        """Some view records tokens (tokenizing is CPU work: a driver may run it off its loop)."""
        self.error: str | None = None
        """The episode's failure (the first one; every view has it)."""
        self.truncated = False
        """The episode was cut short (every view says so)."""
        self.settled: dict[str | None, dict[str, float]] = {}
        """What closing terms added to each role's last step (:meth:`settle`)."""
        self.closed = False

    @classmethod
    def for_env(
        cls, env: PlayableEnv, session_id: str, task_data: dict[str, Any], *, tokenize: bool = True
    ) -> EpisodeRecorder:
        """The recorder of an episode of ``env``: a view per declared role, each with its
        role's chat template (the env's unless the role has its own; none when not
        ``tokenize``: messages and rewards only)."""
        chats: dict[str | None, ChatTokenizer | None] = {
            role: env.role_chats.get(role, env.chat) if tokenize else None
            for role in env.role_names
        } or {None: env.chat if tokenize else None}
        return cls(
            session_id,
            env.env_id,
            task_data,
            chats,
            reward_strategy=env.config.reward_strategy,
            on_template_mismatch=env.config.on_template_mismatch,
        )

    # ------------------------------------------------------------------ what is recorded
    def view(self, role: str | None = None) -> RoleView:
        """The view of ``role`` (``None``: the only view of an episode without roles)."""
        view = self.views.get(role)
        if view is None:
            names = ", ".join(self.roles) if self.roles else "none: leave role out"
            raise EpisodeError(
                f"episode {self.session_id} has no role {role!r}; its roles: {names}"
            )
        return view

    @property
    def session_id(self) -> str:
        return next(iter(self.views.values())).episode.session_id

    @property
    def episodes(self) -> tuple[Episode, ...]:
        """Every view's record, in the env's role order."""
        return tuple(view.episode for view in self.views.values())

    # ------------------------------------------------------------------ a chat stream
    def open_streams(self, tools: tuple[dict[str, Any], ...] = ()) -> None:
        """Start each tokenized view's chat stream (its template given the episode's tools)."""
        for view in self.views.values():
            if view.chat is not None:
                chat = view.chat.with_tools(tools) if tools else view.chat
                view.tokens = EpisodeTokenizer(chat, self.on_template_mismatch)

    def add_prompt(self, role: str | None, new_messages: Messages) -> Messages:
        """The env's ``new_messages`` to ``role``, tokenized with the generation prompt."""
        view = self.views[role]
        messages = view.episode.messages
        messages.extend(new_messages)
        tokens = view.tokens
        if tokens is not None:
            tokens.add_env_turn(messages, new_messages)  # type: ignore[union-attr]
        return new_messages

    def add_reply(
        self,
        role: str | None,
        action: AgentAction,
        *,
        token_in: bool = False,
        message: Message | None = None,
        written: AgentAction | None = None,
    ) -> AgentSpan | None:
        """``role``'s reply: its message (``message``: as a toolbox parsed its calls), and
        its tokens (``written``: the reply as the template writes it, when that differs
        from ``action``); where they landed. ``token_in``: the action answers the view's
        own prompt ids, so its ids are ``sampled``."""
        view = self.views[role]
        if message is None:
            message = {"role": "assistant", "content": action.text}
            if action.tool_calls:
                message["tool_calls"] = action.tool_calls
        view.episode.messages.append(message)
        tokens = view.tokens
        if tokens is None or not isinstance(tokens, EpisodeTokenizer):
            return None
        mismatches_before = tokens.server_mismatches
        span = tokens.add_agent_turn(written or action, token_in=token_in)
        if tokens.server_mismatches > mismatches_before:
            action.info = {**action.info, SERVER_PROMPT_MISMATCH_KEY: True}
        return span

    def record_step(
        self,
        role: str | None,
        action: AgentAction,
        span: AgentSpan | None,
        *,
        reward: float,
        done: bool,
        info: dict[str, Any],
        terms: dict[str, float] | None = None,
    ) -> StepRecord:
        """The step of ``role``'s ``action``: its whole reward (the env's and ``terms``),
        whether it ended the episode, the env's ``info`` (after the action's own). For
        every producer, what the action carries (its text, its cut, its policy version,
        its info) goes into the step record here, and only here."""
        info = {**action.info, **info} if action.info else dict(info)
        source = None
        token_span = None
        if span is not None:
            source = info["token_source"] = span.token_source
            if span.positions:
                token_span = (span.segment, span.positions[0], span.positions[-1] + 1)
        if action.truncated:
            info["reply_truncated"] = True
        terms = terms or {}
        record = StepRecord(
            action=action.text,
            reward=reward + sum(terms.values()) if terms else reward,
            done=done,
            info=info,
            reward_terms=terms,
            num_agent_tokens=len(span.positions) if span is not None else 0,
            token_source=source,
            token_span=token_span,
            reply_truncated=action.truncated,
            policy_version=action.policy_version,
            policy_versions=action.policy_versions,
        )
        view = self.views[role]
        view.episode.steps.append(record)
        if span is not None:
            view.spans.append(span)
        return record

    # ------------------------------------------------------------------ a server's calls
    def open_calls(self, role: str | None = None) -> None:
        """Record ``role``'s tokens from a model server's calls (:meth:`record_call`): its
        view has tokens, even before (or without) a call."""
        view = self.views[role]
        if view.tokens is not None:
            raise EpisodeError(
                f"episode {self.session_id}: the view of {role!r} records its tokens already"
            )
        view.tokens = CallStream()
        view.episode.tokenized = True

    def record_call(
        self,
        role: str | None,
        action: AgentAction,
        *,
        messages: Messages,
        token_source: str,
        info: dict[str, Any],
        reward: float = 0.0,
        done: bool = False,
    ) -> StepRecord:
        """One call of a producer that has only calls: ``action`` carries the prompt ids
        the server conditioned on (``prompt_token_ids``), the ids it sampled and their
        logprobs. A call whose prompt does not extend a segment starts a new one
        (``info["new_segment"]``); ``messages`` is the conversation as the call saw it,
        with its reply (see :meth:`open_calls`)."""
        view = self.views[role]
        stream = view.tokens
        if not isinstance(stream, CallStream):
            raise EpisodeError(
                f"episode {self.session_id}: open the view of {role!r} for calls "
                "(recorder.open_calls) before recording one"
            )
        span, new_segment = stream.place(
            action.prompt_token_ids or [], action.token_ids or [], action.logprobs, token_source
        )
        if new_segment and span.segment > 0:
            info = {**info, "new_segment": True}
        view.episode.messages = messages
        return self.record_step(role, action, span, reward=reward, done=done, info=info)

    def finish_calls(self, role: str | None, closing_ids: list[int]) -> None:
        """End ``role``'s calls with what the chat template writes after the final reply
        (context, mask 0), as a chat stream's view ends: the same rows as the local
        engine's for the same conversation."""
        stream = self.views[role].tokens
        if isinstance(stream, CallStream):
            stream.finish(closing_ids)

    # ------------------------------------------------------------------ the end
    def settle(self, role: str | None, terms: dict[str, float]) -> None:
        """Add closing reward terms to ``role``'s last step (none if it never acted), and
        to what finishing gave the role (:attr:`settled`)."""
        steps = self.views[role].episode.steps
        if not steps or not terms:
            return
        settle(steps[-1], terms)
        given = self.settled.setdefault(role, {})
        for name, value in terms.items():
            given[name] = given.get(name, 0.0) + value

    def fail(self, error: str) -> bool:
        """Record the episode's failure on every view; False if it had one already (the
        first one wins)."""
        if self.error is not None:
            return False
        self.error = text = redact_text(error)
        for view in self.views.values():
            view.episode.error = text
        return True

    def truncate(self) -> None:
        """The episode was cut short (the step limit, or its driver)."""
        self.truncated = True
        for view in self.views.values():
            view.episode.truncated = True

    def close(self) -> tuple[Episode, ...]:
        """Close every view's record (once): final reward, metrics, token segments with
        per-token rewards, the token invariants (a broken one fails the episode)."""
        if not self.closed:
            self.closed = True
            for view in self.views.values():
                _close_view(view, self.reward_strategy)
            first_error = next((e.error for e in self.episodes if e.error is not None), None)
            if first_error is not None:  # a broken token invariant of one view fails all
                self.error = self.error or first_error
                for episode in self.episodes:
                    episode.error = episode.error or first_error
        return self.episodes


def settle(step: StepRecord, terms: dict[str, float]) -> None:
    """Add closing reward terms to a step (a new dict: the step's outcome keeps its own)."""
    settled = dict(step.reward_terms)
    for name, value in terms.items():
        settled[name] = settled.get(name, 0.0) + value
    step.reward_terms = settled
    step.reward += sum(terms.values())


def _close_view(view: RoleView, reward_strategy: RewardStrategyName) -> None:
    """One view's closing record: its final reward, its metrics (turns, the sum of each
    reward term, the env's own share, the game's outcome), its token segments with
    per-token rewards, and the token invariants (a broken one is the episode's error)."""
    episode = view.episode
    step_rewards = [s.reward for s in episode.steps]
    episode.final_reward = float(sum(step_rewards))
    metrics: dict[str, float] = {"turns": float(len(episode.steps))}
    for step in episode.steps:
        for name, value in step.reward_terms.items():
            metrics[f"reward/{name}"] = metrics.get(f"reward/{name}", 0.0) + value
    metrics["reward/env"] = episode.final_reward - sum(
        v for k, v in metrics.items() if k.startswith("reward/")
    )
    if view.outcome is not None:
        metrics["outcome"] = view.outcome
    episode.metrics = metrics
    tokens = view.tokens
    if tokens is None:
        return
    has_logprobs = episode.has_logprobs = tokens.has_logprobs and bool(view.spans)
    episode.segments = [TokenSegment.from_builder(b, has_logprobs) for b in tokens.segments]
    episode.segment_rewards = [
        rewards_array(r)
        for r in assign_token_rewards(
            reward_strategy,
            view.spans[: len(step_rewards)],
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
