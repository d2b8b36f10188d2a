"""TokenSegment: one view of an episode's token stream, held as compact arrays: int32
ids and a uint8 mask cost 5 bytes per token (Python int lists about 36), plus 4 per
*agent* token with logprobs (env tokens' are 0.0, not stored). That lets a run hold
thousands of long trajectories (bench/bench_batches.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from agentsgym.errors import TokenFidelityError

ID_DTYPE = np.int32
MASK_DTYPE = np.uint8
FLOAT_DTYPE = np.float32


class TokenSegment:
    """One self-consistent token stream: the view the model saw, plus its replies.

    :ivar token_ids: ``int32`` ids; ``agent_mask``: ``uint8``, 1 on generated tokens.
    :ivar logprobs: ``float32`` array of the sampled logprobs on agent tokens (0.0
        elsewhere, built on access), or ``None`` when the agent returned none.
    """

    __slots__ = ("_agent_logprobs", "agent_mask", "token_ids")

    def __init__(
        self, token_ids: np.ndarray, agent_mask: np.ndarray, logprobs: np.ndarray | None = None
    ) -> None:
        n = len(token_ids)
        if len(agent_mask) != n or (logprobs is not None and len(logprobs) != n):
            raise TokenFidelityError(
                f"a token segment has {n} ids, {len(agent_mask)} mask values and "
                f"{'no' if logprobs is None else len(logprobs)} logprobs; they must "
                "pair up one to one"
            )
        self.token_ids = token_ids
        self.agent_mask = agent_mask
        self._agent_logprobs: np.ndarray | None = None
        if logprobs is not None:
            agent = agent_mask.astype(bool)
            if np.any(logprobs[~agent]):
                raise TokenFidelityError(
                    "a token segment has non-zero logprobs on env tokens; logprobs belong "
                    "to the tokens the model generated"
                )
            self._agent_logprobs = np.ascontiguousarray(logprobs[agent], dtype=FLOAT_DTYPE)

    @property
    def logprobs(self) -> np.ndarray | None:
        if self._agent_logprobs is None:
            return None
        full = np.zeros(len(self.token_ids), dtype=FLOAT_DTYPE)
        full[self.agent_mask.astype(bool)] = self._agent_logprobs
        return full

    @classmethod
    def from_lists(
        cls,
        token_ids: Sequence[int],
        agent_mask: Sequence[int],
        logprobs: Sequence[float] | None = None,
    ) -> TokenSegment:
        """A segment from plain sequences (copied into arrays)."""
        return cls(
            np.asarray(token_ids, dtype=ID_DTYPE).reshape(-1),
            np.asarray(agent_mask, dtype=MASK_DTYPE).reshape(-1),
            None if logprobs is None else np.asarray(logprobs, dtype=FLOAT_DTYPE).reshape(-1),
        )

    @classmethod
    def from_builder(cls, builder: Any, has_logprobs: bool) -> TokenSegment:
        """A segment from a :class:`~agentsgym.tokenization.SegmentBuilder`'s lists;
        logprobs kept only when every agent action returned them."""
        return cls.from_lists(
            builder.token_ids, builder.agent_mask, builder.logprobs if has_logprobs else None
        )

    def __len__(self) -> int:
        return len(self.token_ids)

    def __repr__(self) -> str:
        logprobs = self._agent_logprobs is not None
        return f"TokenSegment({len(self)} tokens, {self.num_agent_tokens} agent, {logprobs=})"

    @property
    def num_agent_tokens(self) -> int:
        return int(np.count_nonzero(self.agent_mask))

    def logprobs_or_zeros(self) -> np.ndarray:
        """The logprobs, or zeros when the agent returned none."""
        logprobs = self.logprobs
        return logprobs if logprobs is not None else np.zeros(len(self), dtype=FLOAT_DTYPE)

    @property
    def nbytes(self) -> int:
        logprobs = 0 if self._agent_logprobs is None else self._agent_logprobs.nbytes
        return int(self.token_ids.nbytes + self.agent_mask.nbytes + logprobs)


def rewards_array(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Per-token rewards as a compact ``float32`` array."""
    return np.asarray(values, dtype=FLOAT_DTYPE).reshape(-1)
