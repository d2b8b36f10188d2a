"""Agents and templates for the trainer tests: token-in replies with think blocks,
known logprobs, truncation flags."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

from agentsgym.tokenization import ChatTokenizer
from agentsgym.types import AgentAction, EpisodeContext

# ChatML that drops the think blocks of earlier assistant turns, as Qwen3's does: it
# is not prefix-preserving, so episodes with think blocks split into views.
THINK_STRIPPING_TEMPLATE = (
    "{%- for message in messages %}{%- set content = message['content'] %}"
    "{%- if message['role'] == 'assistant' and not loop.last and '</think>' in content %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + content + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def with_template(tokenizer: Any, template: str) -> Any:
    """A copy of ``tokenizer`` with another chat template (the original is shared)."""
    copied = copy.copy(tokenizer)
    copied.chat_template = template
    return copied


class ThinkingAgent:
    """Guesses with a think block and returns sampled-looking ids and logprobs.

    Turn ``t`` of rollout ``r`` of task ``i`` guesses ``(i + r + t) % high + 1``. The ids
    are the reply's tokenization with special tokens parsed (as a model samples
    ``<think>``) plus the end-of-turn token; logprob ``j`` of a reply is
    ``base_logprob - 0.01 * j`` (``base_logprob`` -0.5), except that position ``nan_at``
    (if given) is ``NaN`` (a logprob the sampler did not know).
    ``truncate_turn`` returns that turn's reply without its end-of-turn token,
    flagged as cut at the length limit.
    """

    wants_prompt_token_ids = True

    def __init__(
        self,
        tokenizer: Any,
        *,
        high: int = 3,
        words: str = "Maybe it is {k}.",
        nan_at: int | None = None,
        truncate_turn: int | None = None,
        logprobs: bool = True,
        base_logprob: float = -0.5,
    ) -> None:
        self.tokenizer = tokenizer
        self.eot = ChatTokenizer(tokenizer).eot_ids
        self.high = high
        self.words = words
        self.nan_at = nan_at
        self.truncate_turn = truncate_turn
        self.logprobs = logprobs
        self.base_logprob = base_logprob

    def reply_text(self, start: int, turn: int) -> str:
        k = (start + turn) % self.high + 1
        return f"<think>\n{self.words.format(k=k)}\n</think>\n\nGuess: [{k}]"

    def get_action(
        self,
        messages: list[dict[str, str]],
        agent_state: Any,
        *,
        prompt_token_ids: list[int] | None = None,
        context: EpisodeContext | None = None,
    ) -> tuple[AgentAction, Any]:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        start = context.task_index + context.rollout_index if context is not None else 0
        text = self.reply_text(start, turn)
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        truncated = turn == self.truncate_turn
        if not truncated:
            ids += self.eot
        logprobs = None
        if self.logprobs:
            logprobs = [self.base_logprob - 0.01 * j for j in range(len(ids))]
            if self.nan_at is not None:
                logprobs[self.nan_at] = math.nan
        return AgentAction(text, token_ids=ids, logprobs=logprobs, truncated=truncated), agent_state


def has_signal(episodes: list[Any]) -> bool:
    """Whether some task's rollouts got different rewards, so that a step on them has a
    nonzero advantage (sampling decides it). Rollouts of one task share its task data
    (TRL even plays each generation of a prompt as a task of its own)."""
    by_task: dict[str, set[float]] = {}
    for episode in episodes:
        key = json.dumps(episode.task_data, sort_keys=True)
        by_task.setdefault(key, set()).add(episode.final_reward)
    return any(len(rewards) > 1 for rewards in by_task.values())
