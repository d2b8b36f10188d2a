"""A program session's calls as one :class:`agentsgym.Episode`, recorded by the core's
episode recorder (:class:`agentsgym.runtime.EpisodeRecorder`), as every producer's are.

Each successful call is a step: its completion's tokens are agent tokens, placed by the
recorder (a call whose prompt does not extend a segment starts a new one), with the
version of the weights that answered it when the backend said (``policy_version``, and
per token when a streamed reply's chunks came from different weights: a staleness bound
then holds per token, not by the version at dispatch). A call the
backend gave ids for is ``token_source="server"``; a text-only one is tokenized with the
env's chat template as vLLM renders it (its messages, tool-call arguments parsed, with
its tools; then the reply and the end-of-turn token) and marked ``"retokenized"``. The
verifier's score is the last step's reward, spread over the tokens by the env's reward
strategy, as for every env. With the env's template, the episode ends as a chat stream
does: what the template writes after the final reply (ChatML's newline) closes its row,
as context.

``episode.metrics`` adds, per episode: ``segments``, ``calls``, ``new_segments``
(calls that did not extend a segment) and ``sampled_token_share``, the share of loss
tokens whose ids the backend sampled (1.0 unless some calls were retokenized).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentsgym import AgentAction, Episode
from agentsgym.errors import TokenizerRequiredError
from agentsgym.runtime import EpisodeRecorder, parse_tool_arguments
from agentsgym_gateway.records import CallRecord


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
    prompt = rendering.encode_prompt(parse_tool_arguments(call.messages))
    return prompt, chat.encode_model_text(call.text) + list(chat.eot_ids), None


def _reply(call: CallRecord) -> dict[str, Any]:
    """The call's answer as the conversation's next message."""
    reply: dict[str, Any] = {"role": "assistant", "content": call.text}
    if call.tool_calls:
        reply["tool_calls"] = call.tool_calls
    return reply


def _closing_ids(call: CallRecord, completion: list[int], chat: Any) -> list[int]:
    """What the chat template writes after the final call's reply, as the local engine's
    stream ends: the end-of-turn token where the reply did not generate it, then the
    text after it (ChatML's newline). None for a text completion or without a template."""
    if chat is None or call.endpoint == "completions" or not chat.eot_text:
        return []
    rendering = chat.with_tools(call.tools) if call.tools else chat
    conversation = parse_tool_arguments([*call.messages, _reply(call)])
    whole = rendering.render(conversation, add_generation_prompt=False)
    end = whole.rfind(chat.eot_text)
    if end < 0:
        return []
    after = whole[end + len(chat.eot_text) :]
    eot = list(chat.eot_ids)
    ended = completion[-len(eot) :] == eot
    return ([] if ended else eot) + (chat.encode_text(after) if after else [])


def _info(call: CallRecord) -> dict[str, Any]:
    info: dict[str, Any] = {"call": call.index, "endpoint": call.endpoint}
    if call.tool_calls:
        info["tool_calls"] = len(call.tool_calls)
    return info


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

    :param chat: the env's :class:`agentsgym.runtime.ChatTokenizer`, for retokenized calls.
    :param error: the program's failure, if it failed (the episode keeps its calls).

    A token invariant that does not hold (``Episode.check``) is the episode's error, never
    raised, like every env's.
    """
    strategy: Any = reward_strategy  # checked where the env's config was read
    recorder = EpisodeRecorder(
        session_id, env_id, dict(task_data), {None: None}, reward_strategy=strategy
    )
    recorder.open_calls()
    if error is not None:
        recorder.fail(error)
    placed: list[tuple[CallRecord, AgentAction]] = []
    for call in sorted((c for c in calls if c.ok), key=lambda c: c.index):
        try:
            prompt, completion, logprobs = _ids_of(call, chat)
        except TokenizerRequiredError as exc:
            recorder.fail(str(exc))
            break
        action = AgentAction(
            call.text,
            token_ids=completion,
            logprobs=logprobs,
            prompt_token_ids=prompt,
            truncated=call.finish_reason == "length",
            policy_version=call.policy_version,
            policy_versions=call.policy_versions,
        )
        placed.append((call, action))
    for index, (call, action) in enumerate(placed):
        last = index == len(placed) - 1
        recorder.record_call(
            None,
            action,
            messages=[*call.messages, _reply(call)],
            token_source=call.token_source,
            info=_info(call),
            reward=float(reward) if last else 0.0,
            done=last,
        )
    if placed:
        call, action = placed[-1]
        recorder.finish_calls(None, _closing_ids(call, list(action.token_ids or []), chat))
    [episode] = recorder.close()
    episode.metrics.update(_metrics(episode))
    return episode


def _metrics(episode: Episode) -> dict[str, float]:
    loss_tokens = sum(s.num_agent_tokens for s in episode.steps)
    sampled = sum(s.num_agent_tokens for s in episode.steps if s.token_source == "server")
    return {
        "calls": float(len(episode.steps)),
        "segments": float(len(episode.segments)),
        "new_segments": float(sum(1 for s in episode.steps if s.info.get("new_segment"))),
        "sampled_token_share": sampled / loss_tokens if loss_tokens else 0.0,
    }
