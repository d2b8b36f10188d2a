"""One task's group of episodes as Atropos's ``ScoredDataGroup`` (one sequence per
scored episode).

How agentsgym's fields map onto Atropos's ``ScoredDataGroup`` (one group = one task,
one sequence per scored episode):

* ``tokens``: the episode's token ids, exactly as the model saw and generated them;
* ``masks``: Atropos's labels convention: the token id where the model generated the
  token (agentsgym's ``agent_token_mask`` is 1), ``-100`` elsewhere;
* ``scores``: the episode's ``final_reward``;
* ``advantages`` (``advantages="per_token"``): agentsgym's per-token rewards,
  normalised over the group's agent tokens (as ``per-token-grpo`` does), 0.0 on env
  tokens; ``None`` by default, so the trainer computes group advantages from scores;
* ``inference_logprobs``: the sampled logprobs, one per token as atroposlib's
  ``ManagedServer`` writes them (the sampled value on model tokens, ``1.0`` on the
  masked ones), when every sequence of the group has them; else ``None`` (a 0.0
  would claim probability 1 for a token whose logprob is unknown);
* ``messages``: the episode's conversation;
* ``group_overrides["agentsgym"]``: the env id, task and session ids, so a trainer
  can trace a sequence back.

Where they differ: an episode that a chat template which is not prefix-preserving
split into several views becomes one sequence per view (each with the episode's
score), so that group holds more than ``group_size`` sequences; the API server then
holds it back until groups add up to the registered size, so use a prefix-preserving
(training) chat template with Atropos. A group with a failed episode is not pushed
(GRPO needs whole groups); it is counted in :attr:`AtroposProducer.stats` and logged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from agentsgym.runtime import redact

if TYPE_CHECKING:
    from agentsgym import TrajectoryGroup

IGNORE_INDEX = -100
MASKED_LOGPROB = 1.0
"""atroposlib's placeholder logprob on tokens the model did not generate."""
Advantages = Literal["none", "per_token"]


def to_scored_data_group(
    group: TrajectoryGroup, *, advantages: Advantages = "none", env_id: int | None = None
) -> dict[str, Any]:
    """One task's group as Atropos's ``ScoredDataGroup`` (see the module docstring)."""
    tokens: list[list[int]] = []
    masks: list[list[int]] = []
    scores: list[float] = []
    messages: list[list[dict[str, Any]]] = []
    logprobs: list[list[float]] = []
    rewards: list[np.ndarray] = []
    agent_masks: list[np.ndarray] = []
    all_logprobs = True
    for episode, index in group.rows:
        segment = episode.segments[index]
        ids = segment.token_ids.astype(np.int64)
        agent = segment.agent_mask.astype(bool)
        tokens.append(ids.tolist())
        masks.append(np.where(agent, ids, IGNORE_INDEX).tolist())
        scores.append(float(episode.final_reward))
        messages.append([dict(m) for m in episode.messages])
        sampled = segment.logprobs
        if sampled is None:
            all_logprobs = False
        else:
            logprobs.append(np.where(agent, sampled, MASKED_LOGPROB).tolist())
        rewards.append(np.asarray(episode.segment_rewards[index], dtype=np.float64))
        agent_masks.append(agent)
    data: dict[str, Any] = {
        "tokens": tokens,
        "masks": masks,
        "scores": scores,
        "messages": messages,
        "advantages": group_advantages(rewards, agent_masks) if advantages == "per_token" else None,
        "inference_logprobs": logprobs if all_logprobs and logprobs else None,
        # A trace for the trainer's records: secrets in task data stay out of them.
        "group_overrides": {
            "agentsgym": redact(
                {
                    "env_id": group.env_id,
                    "task_index": group.task_index,
                    "task_data": group.task_data,
                    "session_ids": [e.session_id for e, _ in group.rows],
                }
            )
        },
    }
    if env_id is not None:
        data["env_id"] = env_id
    return data


def group_advantages(
    rewards: Sequence[np.ndarray], agent_masks: Sequence[np.ndarray]
) -> list[list[float]]:
    """Per-token rewards minus the mean over the group's agent tokens, over their std."""
    values = (
        np.concatenate([r[m] for r, m in zip(rewards, agent_masks)]) if rewards else np.zeros(0)
    )
    mean = float(values.mean()) if values.size else 0.0
    std = float(values.std()) if values.size > 1 else 0.0
    return [
        np.where(m, (r - mean) / (std + 1e-4), 0.0).tolist() for r, m in zip(rewards, agent_masks)
    ]
