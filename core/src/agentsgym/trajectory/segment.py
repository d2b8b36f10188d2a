"""TokenSegment: one view of an episode's token stream, held as compact arrays.

An episode's tokens are built turn by turn as Python lists (see
:mod:`agentsgym.tokenization`); when the episode ends they become a
:class:`TokenSegment` of numpy arrays: ids as int32, the agent mask as uint8, the
sampled logprobs as float32 (``None`` when the agent returned none). A list of Python
ints costs about 36 bytes per token (8 for the pointer, 28 for an int above 256);
these cost 5 bytes per token, plus 4 per *agent* token with logprobs (logprobs are
0.0 on every env token, so only the agent tokens' are stored), which is what lets a
run hold thousands of long trajectories (bench/bench_batches.py).
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

    :ivar token_ids: ``int32`` array.
    :ivar agent_mask: ``uint8`` array, 1 on exactly the tokens the model generated.
    :ivar logprobs: ``float32`` array of the sampled logprobs on agent tokens (0.0
        elsewhere), or ``None`` when the agent returned no logprobs. Built on access
        from the agent tokens' values, which is all the segment stores.
    """

    __slots__ = ("token_ids", "agent_mask", "_agent_logprobs")

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
        """The finished segment of an episode-time builder (``.token_ids``,
        ``.agent_mask``, ``.logprobs`` lists); logprobs kept only when every agent
        action returned them."""
        return cls.from_lists(
            builder.token_ids, builder.agent_mask, builder.logprobs if has_logprobs else None
        )

    def __len__(self) -> int:
        return len(self.token_ids)

    def __repr__(self) -> str:
        return (
            f"TokenSegment({len(self)} tokens, {self.num_agent_tokens} agent, "
            f"logprobs={self._agent_logprobs is not None})"
        )

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
