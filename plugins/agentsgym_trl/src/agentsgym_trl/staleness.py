"""Tokens too old to train: the token-level half of the staleness bound.

A rollout stream (``--async --max-staleness K``) admits a step's batch only while its
oldest tokens are at most ``K`` versions behind the trainer (whole groups, see
:mod:`agentsgym_trl.rollout_stream`). Every token also carries the version that sampled
it (per token when an inference engine was updated in the middle of a reply), and the
trainers mask out of the loss any token older than the bound when the batch is trained:
no token beyond the bound is ever trained, whatever happened between admission and the
update. With an inference engine generating synchronously the bound is 0: every token
must come from the weights being trained, and one that does not (weights left stale)
is masked and counted. Tokens of unknown version (``-1``) are not masked: their age
cannot be known (the stream's admission judged their group by its dispatch version).

The step log counts masked tokens as ``stale_tokens_masked``; a run's rows
(``played.jsonl``: ``step``, ``per_token_policy_versions``) let anyone recount them
(``bench/audit_staleness.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from agentsgym import Episode
from agentsgym.runtime import UNKNOWN_VERSION


@dataclass(frozen=True)
class StalenessBound:
    """The batch is trained at ``version``; tokens more than ``max_staleness`` versions
    older are stale."""

    version: int
    max_staleness: int

    def stale(self, versions: np.ndarray) -> np.ndarray:
        """Which of ``versions`` (any shape) are known and beyond the bound."""
        return (versions != UNKNOWN_VERSION) & (self.version - versions > self.max_staleness)


def stale_agent_tokens(episodes: Iterable[Episode], bound: StalenessBound) -> int:
    """How many agent tokens of ``episodes`` (every view) are beyond ``bound``."""
    count = 0
    for episode in episodes:
        for index, segment in enumerate(episode.segments):
            stale = bound.stale(episode.token_policy_versions(index))
            count += int((stale & segment.agent_mask.astype(bool)).sum())
    return count
