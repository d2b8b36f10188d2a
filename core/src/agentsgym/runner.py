"""The runner: plays episodes through an env's hooks, trials, and padded groups.

A failing episode (an exception in a hook or the agent) is recorded on the episode
with its error and never takes the batch down.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from agentsgym.agents.base import call_agent
from agentsgym.errors import EpisodeError
from agentsgym.rewards import assign_token_rewards
from agentsgym.tokenization import AgentSpan, EpisodeTokenizer
from agentsgym.trajectory import Episode, StepRecord, TrajectoryBatch, TrajectoryGroup
from agentsgym.types import Message, Messages, RewardTerm, StepResult

if TYPE_CHECKING:
    from agentsgym.agents import Agent
    from agentsgym.env import MultistepEnv

logger = logging.getLogger(__name__)

EpisodeCallback = Callable[[Episode], None]


def play_episode(
    env: MultistepEnv,
    session_id: str,
    agent: Agent,
    agent_state: Any = None,
    cancel: threading.Event | None = None,
) -> Episode:
    """Play one episode of the task registered under ``session_id``.

    ``cancel``, once set, ends the episode before its next agent call (recorded as
    failed), so an interrupted run waits for at most one call per thread.
    """
    if session_id not in env.sessions:
        raise EpisodeError(
            f"unknown session {session_id!r}; register its task first with "
            "env.new_session(task_data)"
        )
    task_data = env.sessions[session_id]
    episode = Episode(
        session_id=session_id,
        env_id=env.env_id,
        task_data=task_data,
        tokenized=env.chat is not None,
    )
    tokens = (
        EpisodeTokenizer(env.chat, env.config.on_template_mismatch)
        if env.chat is not None
        else None
    )
    spans: list[AgentSpan] = []
    state: Any = None
    try:
        state = env.hook.initialize_episode(env=env, session_id=session_id, task_data=task_data)
        if state is None:
            raise EpisodeError(
                f"{type(env).__name__}: no initialize_episode implementation returned a state"
            )
        for step in range(env.config.max_steps_per_episode):
            new_messages = _as_messages(env.hook.format_prompt(env=env, state=state, step=step), env)
            episode.messages.extend(new_messages)
            if tokens is not None:
                tokens.add_env_turn(episode.messages, new_messages)
            if cancel is not None and cancel.is_set():
                raise EpisodeError("cancelled: the run was interrupted")
            action, agent_state = call_agent(
                agent,
                episode.messages,
                agent_state,
                tokens.prompt_token_ids() if tokens is not None else None,
            )
            episode.messages.append({"role": "assistant", "content": action.text})
            span = tokens.add_agent_turn(action) if tokens is not None else None
            result = _as_step_result(
                env.hook.step_episode(
                    env=env, state=state, action=action.text, step=step, reply=action
                ),
                env,
            )
            terms = _collect_terms(
                env.hook.reward_shaping(
                    env=env, state=state, action=action.text, step_result=result,
                    step=step, reply=action,
                )
            )
            episode.steps.append(
                StepRecord(
                    action=action.text,
                    reward=result.reward + sum(terms.values()),
                    done=result.done,
                    info={**action.info, **result.info} if action.info else result.info,
                    reward_terms=terms,
                    num_agent_tokens=len(span.positions) if span else 0,
                    reply_truncated=action.truncated,
                )
            )
            if span is not None:
                spans.append(span)
            state = result.state
            if result.done:
                break
        else:
            episode.truncated = True
        if tokens is not None:
            tokens.finish(episode.messages)
    except Exception as exc:  # recorded, never raised: one bad episode must not sink a batch
        episode.error = f"{type(exc).__name__}: {exc}"
        logger.debug("episode %s of %s failed: %s", session_id, env.env_id, episode.error)
    _finish_hook(env, episode, state)
    episode.agent_state = agent_state
    _finalise(env, episode, tokens, spans)
    return episode


def _finish_hook(env: MultistepEnv, episode: Episode, state: Any) -> None:
    """Call finish_episode; its terms join the last step (never for a failed episode)."""
    try:
        terms = _collect_terms(
            env.hook.finish_episode(
                env=env, state=state, truncated=episode.truncated, error=episode.error,
                session_id=episode.session_id,
            )
        )
    except Exception as exc:
        logger.warning("finish_episode of %s failed: %s: %s", env.env_id, type(exc).__name__, exc)
        if episode.error is None:
            episode.error = f"finish_episode: {type(exc).__name__}: {exc}"
        return
    if terms and episode.error is None and episode.steps:
        last = episode.steps[-1]
        for name, value in terms.items():
            last.reward_terms[name] = last.reward_terms.get(name, 0.0) + value
        last.reward += sum(terms.values())


def _finalise(
    env: MultistepEnv, episode: Episode, tokens: EpisodeTokenizer | None, spans: list[AgentSpan]
) -> None:
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
    if tokens is None:
        return
    episode.segments = tokens.segments
    episode.has_logprobs = tokens.has_logprobs and bool(spans)
    episode.segment_rewards = assign_token_rewards(
        env.config.reward_strategy,
        spans[: len(step_rewards)],
        step_rewards,
        episode.final_reward,
        [len(s) for s in tokens.segments],
    )
    if episode.ok:
        try:
            episode.check()
        except Exception as exc:
            episode.error = f"{type(exc).__name__}: {exc}"
            logger.error("episode %s broke a token invariant: %s", episode.session_id, exc)


def _as_messages(prompt: Any, env: MultistepEnv) -> Messages:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if isinstance(prompt, list) and prompt:
        messages: Messages = []
        for message in prompt:
            if not (
                isinstance(message, dict)
                and isinstance(message.get("role"), str)
                and isinstance(message.get("content"), str)
            ):
                raise EpisodeError(
                    f"{type(env).__name__}.format_prompt returned {message!r:.120}; each "
                    "message must be a dict with str 'role' and 'content'"
                )
            messages.append(Message(role=message["role"], content=message["content"]))
        return messages
    raise EpisodeError(
        f"{type(env).__name__}.format_prompt returned {prompt!r:.120}; expected a string "
        "or a non-empty list of message dicts"
    )


def _as_step_result(result: Any, env: MultistepEnv) -> StepResult:
    if not (isinstance(result, tuple) and len(result) == 4):
        raise EpisodeError(
            f"{type(env).__name__}.step_episode returned {result!r:.120}; expected "
            "(next_state, reward, done, info)"
        )
    state, reward, done, info = result
    try:
        reward = float(reward)
    except (TypeError, ValueError):
        raise EpisodeError(f"step_episode returned a non-numeric reward {reward!r}") from None
    if not math.isfinite(reward):
        raise EpisodeError(f"step_episode returned a non-finite reward {reward!r}")
    if info is None:
        info = {}
    if not isinstance(info, dict):
        raise EpisodeError(f"step_episode returned info of type {type(info).__name__}; expected dict")
    return StepResult(state, reward, bool(done), info)


def _collect_terms(results: list[Any]) -> dict[str, float]:
    terms: dict[str, float] = {}
    flat: list[Any] = []
    for result in results:
        flat.extend(result if isinstance(result, list) else [result])
    for term in flat:
        if term is None:
            continue
        if not (isinstance(term, tuple) and len(term) == 2 and isinstance(term[0], str)):
            raise EpisodeError(
                f"reward_shaping returned {term!r:.120}; expected RewardTerm(name, value) or None"
            )
        name, value = RewardTerm(*term)
        terms[name] = terms.get(name, 0.0) + float(value)
    return terms


def play_trial(
    env: MultistepEnv,
    task_data: dict[str, Any],
    agent: Agent,
    *,
    task_index: int = 0,
    rollout_index: int = 0,
    on_episode: EpisodeCallback | None = None,
    cancel: threading.Event | None = None,
) -> list[Episode]:
    """Play the ``episodes_per_trial`` episodes of one trial; the last is scored."""
    session_id = env.new_session(task_data)
    agent_state: Any = None
    episodes: list[Episode] = []
    try:
        for index in range(env.config.episodes_per_trial):
            episode = play_episode(env, session_id, agent, agent_state, cancel)
            episode.task_index, episode.rollout_index, episode.episode_index = (
                task_index,
                rollout_index,
                index,
            )
            if index < env.config.free_shots:
                _make_free_shot(episode)
            episodes.append(episode)
            if on_episode is not None:
                on_episode(episode)
            if not episode.ok:
                break
            agent_state = episode.agent_state
    finally:
        env.sessions.pop(session_id, None)
    return episodes


def _make_free_shot(episode: Episode) -> None:
    episode.free_shot = True
    episode.metrics["raw_final_reward"] = episode.final_reward
    episode.final_reward = 0.0
    episode.segment_rewards = [[0.0] * len(r) for r in episode.segment_rewards]


def run_trial(
    env: MultistepEnv,
    task_data_list: list[dict[str, Any]],
    agent: Agent,
    num_rollouts: int = 1,
    *,
    max_concurrency: int = 8,
    on_episode: EpisodeCallback | None = None,
) -> TrajectoryBatch:
    """Play ``num_rollouts`` trials of every task, concurrently; one group per task."""
    if num_rollouts < 1:
        raise ValueError(f"num_rollouts must be at least 1, got {num_rollouts}")
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
    jobs = [(t, r) for t in range(len(task_data_list)) for r in range(num_rollouts)]
    cancel = threading.Event()

    def run(job: tuple[int, int]) -> list[Episode]:
        task_index, rollout_index = job
        return play_trial(
            env,
            task_data_list[task_index],
            agent,
            task_index=task_index,
            rollout_index=rollout_index,
            on_episode=on_episode,
            cancel=cancel,
        )

    if max_concurrency == 1 or len(jobs) <= 1:
        trials = [run(job) for job in jobs]
    else:
        pool = ThreadPoolExecutor(max_workers=min(max_concurrency, len(jobs)))
        try:
            trials = list(pool.map(run, jobs))
        except BaseException:
            # Ctrl-C: drop the trials not started yet and stop the running ones at their
            # next agent call, instead of playing everything before exiting.
            cancel.set()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
    failed = [e for trial in trials for e in trial if not e.ok]
    if failed:
        logger.warning(
            "%d of %d episodes of %s failed (kept with their errors in batch.failed); first: %s",
            len(failed), sum(len(t) for t in trials), env.env_id, failed[0].error,
        )
    pad_id = env.chat.pad_token_id if env.chat is not None else None
    groups = [
        TrajectoryGroup(
            task_index=t,
            task_data=dict(task_data_list[t]),
            env_id=env.env_id,
            trials=trials[t * num_rollouts : (t + 1) * num_rollouts],
            pad_token_id=pad_id,
            tokenized=env.chat is not None,
        )
        for t in range(len(task_data_list))
    ]
    return TrajectoryBatch(groups)
