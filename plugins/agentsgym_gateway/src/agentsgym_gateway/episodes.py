"""A program session's calls as one :class:`agentsgym.Episode`.

Each successful call is a step: its completion's tokens are agent tokens, placed by
:mod:`agentsgym_gateway.segments`. A call the backend gave ids for is
``token_source="server"``; a text-only one is tokenized with the env's chat template
(its messages with its tools, then the reply and the end-of-turn token) and marked
``"retokenized"``. The verifier's score is the last step's reward, spread over the
tokens by the env's reward strategy, as for every env.

``episode.metrics`` adds, per episode: ``segments``, ``calls``, ``new_segments``
(calls that did not extend a segment) and ``sampled_token_share``, the share of loss
tokens whose ids the backend sampled (1.0 unless some calls were retokenized).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from agentsgym import AgentSpan, Episode, StepRecord, TokenSegment, assign_token_rewards
from agentsgym.errors import TokenFidelityError, TokenizerRequiredError
from agentsgym_gateway.records import CallRecord
from agentsgym_gateway.segments import Placement, SegmentAssembler


def _ids_of(call: CallRecord, chat: Any) -> tuple[list[int], list[int], list[float] | None]:
    """``(prompt ids, completion ids, logprobs)``: the backend's, or retokenized."""
    if call.token_source == "server":
        assert call.prompt_token_ids is not None and call.completion_token_ids is not None
        return call.prompt_token_ids, call.completion_token_ids, call.logprobs
    if chat is None:
        raise TokenizerRequiredError(
            f"call {call.index} came back without token ids (a backend without "
            "return_token_ids); give the env a tokenizer to retokenize its text"
        )
    if call.endpoint == "completions":
        prompt = (
            call.prompt
            if isinstance(call.prompt, list)
            else chat.encode_model_text(call.prompt or "")
        )
        return list(prompt), chat.encode_model_text(call.text), None
    rendering = chat.with_tools(call.tools) if call.tools else chat
    prompt = rendering.encode_prompt(call.messages)
    return prompt, chat.encode_model_text(call.text) + list(chat.eot_ids), None


def _step(call: CallRecord, placement: Placement, tokens: int) -> StepRecord:
    info: dict[str, Any] = {"call": call.index, "endpoint": call.endpoint}
    if call.tool_calls:
        info["tool_calls"] = len(call.tool_calls)
    if placement.new_segment and placement.segment > 0:
        info["new_segment"] = True
    return StepRecord(
        action=call.text,
        reward=0.0,
        done=False,
        info=info,
        num_agent_tokens=tokens,
        token_source=call.token_source,
        reply_truncated=call.finish_reason == "length",
        token_span=(placement.segment, placement.start, placement.end),
    )


def episode_from_calls(
    calls: Sequence[CallRecord],
    *,
    session_id: str,
    env_id: str,
    task_data: dict[str, Any],
    reward: float = 0.0,
    chat: Any = None,
    reward_strategy: str = "spread",
    error: str | None = None,
) -> Episode:
    """The episode of a session's ``calls`` (failed calls are skipped), scored ``reward``.

    :param chat: the env's :class:`agentsgym.ChatTokenizer`, for retokenized calls.
    :param error: the program's failure, if it failed (the episode keeps its calls).

    A token invariant that does not hold (``Episode.check``) is the episode's error, never
    raised, like every env's.
    """
    episode = Episode(session_id=session_id, env_id=env_id, task_data=dict(task_data))
    episode.error = error
    assembler = SegmentAssembler()
    spans: list[AgentSpan] = []
    all_logprobs = True
    for call in sorted((c for c in calls if c.ok), key=lambda c: c.index):
        try:
            prompt, completion, logprobs = _ids_of(call, chat)
        except TokenizerRequiredError as exc:
            episode.error = episode.error or str(exc)
            break
        all_logprobs = all_logprobs and logprobs is not None
        placement = assembler.place(prompt, completion, logprobs)
        episode.steps.append(_step(call, placement, len(completion)))
        positions = list(range(placement.start, placement.end))
        spans.append(AgentSpan(placement.segment, positions, call.token_source))
        episode.messages = [*call.messages, {"role": "assistant", "content": call.text}]
    if episode.steps:
        episode.steps[-1].reward = float(reward)
        episode.steps[-1].done = True
    episode.final_reward = float(reward) if episode.steps else 0.0
    episode.tokenized = True
    episode.has_logprobs = all_logprobs and bool(episode.steps)
    episode.segments = [
        TokenSegment.from_lists(
            s.token_ids, s.agent_mask, s.logprobs if episode.has_logprobs else None
        )
        for s in assembler.segments
    ]
    lengths = [len(s) for s in episode.segments]
    token_rewards = assign_token_rewards(
        reward_strategy, spans, [s.reward for s in episode.steps], episode.final_reward, lengths
    )
    episode.segment_rewards = [np.asarray(r, dtype=np.float32) for r in token_rewards]
    episode.metrics = _metrics(episode)
    if episode.ok:
        try:
            episode.check()
        except TokenFidelityError as exc:  # recorded: one broken episode never sinks a run
            episode.error = f"{type(exc).__name__}: {exc}"
    return episode


def _metrics(episode: Episode) -> dict[str, float]:
    loss_tokens = sum(s.num_agent_tokens for s in episode.steps)
    sampled = sum(s.num_agent_tokens for s in episode.steps if s.token_source == "server")
    return {
        "turns": float(len(episode.steps)),
        "calls": float(len(episode.steps)),
        "segments": float(len(episode.segments)),
        "new_segments": float(sum(1 for s in episode.steps if s.info.get("new_segment"))),
        "sampled_token_share": sampled / loss_tokens if loss_tokens else 0.0,
        "reward/env": episode.final_reward,
    }
