"""The arrays ``per-token-grpo`` trains on, from a padded batch of rollouts.

One row per view of an episode (``batch.padded_arrays()``), cut to the widest kept
row. The screening policies (:mod:`agentsgym_trl.screening`) decide which rows are
left out (re-tokenized data under ``on_retokenized="drop"``) and which are masked out
of the loss (a reply cut at the length limit), and the credit assignment
(:mod:`agentsgym_trl.credit`) gives every agent token its advantage.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from agentsgym import Episode, TrajectoryBatch
from agentsgym_trl.credit import CreditAssignment, Normalization, advantages
from agentsgym_trl.screening import RolloutScreen
from agentsgym_trl.staleness import StalenessBound


def batch_arrays(
    batch: TrajectoryBatch,
    screen: RolloutScreen,
    *,
    multi_turn: Callable[[Episode], bool] | None,
    credit: CreditAssignment,
    gamma: float,
    normalization: Normalization,
    bound: StalenessBound | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """The arrays of the rows that train, and the screening counts for the step log.

    The arrays: ``input_ids``, ``attention_mask``, ``agent_token_mask`` (the episodes'
    own masks), ``loss_mask`` (the agent mask minus masked episodes), ``advantages``,
    ``sampled_logprobs`` (``NaN`` where unknown) and ``group_indices``. The counts:
    ``dropped_rollouts``, ``masked_rollouts`` and, with a ``bound``,
    ``stale_tokens_masked`` (agent tokens older than the bound, out of the loss mask:
    :mod:`agentsgym_trl.staleness`).

    :param multi_turn: whether an episode's env is multi-turn (default: all are).
    """
    episodes, segments = batch.episodes, batch.segment_indices
    unique = list({id(e): e for e in episodes}.values())
    dropped = screen.dropped(unique)
    keep = [i for i, e in enumerate(episodes) if id(e) not in dropped]
    arrays = batch.padded_arrays()
    rows = [(episodes[i], segments[i]) for i in keep]
    width = max((len(e.segments[s]) for e, s in rows), default=0)
    picked = {k: v[keep][:, :width] if v.ndim == 2 else v[keep] for k, v in arrays.items()}
    masked = np.asarray(
        [screen.masks(e, multi_turn or (lambda _e: True)) for e, _ in rows], dtype=bool
    )
    agent_mask = picked["agent_token_mask"]
    sampled = picked["sampled_logprobs"].astype(np.float32)
    for index, (episode, segment) in enumerate(rows):
        if not episode.has_logprobs or episode.segments[segment].logprobs is None:
            sampled[index, agent_mask[index].astype(bool)] = np.nan
    failed = {id(e) for (e, _), m in zip(rows, masked) if m}
    loss_mask = agent_mask * (~masked)[:, None].astype(agent_mask.dtype)
    stale = np.zeros(loss_mask.shape, dtype=bool)
    if bound is not None:
        stale = bound.stale(picked["policy_versions"]) & loss_mask.astype(bool)
        loss_mask = loss_mask * (~stale).astype(loss_mask.dtype)
    tensors = {
        "input_ids": picked["input_ids"],
        "attention_mask": picked["attention_mask"],
        "agent_token_mask": agent_mask,
        "loss_mask": loss_mask,
        "advantages": advantages(
            rows,
            picked["group_indices"],
            agent_mask,
            picked["per_token_rewards"],
            credit=credit,
            gamma=gamma,
            normalization=normalization,
            failed=failed,
            failure_score=screen.failure_score,
        ),
        "sampled_logprobs": sampled,
        "group_indices": picked["group_indices"],
    }
    screened = {"dropped_rollouts": float(len(dropped)), "masked_rollouts": float(len(failed))}
    if bound is not None:
        screened["stale_tokens_masked"] = float(stale.sum())
    return tensors, screened
