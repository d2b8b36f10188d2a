"""Calls into token segments: continue a segment where a call extends it, else start one.

A call's prompt ids are what the backend conditioned on. When they begin with a
segment's ids (the previous prompt plus its completion, plus the new turns), the call
continues that segment: the new prompt tokens are env tokens, the completion agent
tokens. When no segment is a prefix of them (the program dropped or summarized its
history, changed its system prompt, or ran this call beside another one), the call
starts a new segment from its own prompt, all of it env tokens: a completion is an
agent token exactly once, in the segment where it was sampled, so nothing sampled is
trained twice and nothing is silently mismatched.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class OpenSegment:
    """One segment being built (plain lists: appended to call by call)."""

    token_ids: list[int] = field(default_factory=list)
    agent_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Placement:
    """Where a call's completion landed: segment, start, end; and whether it began it."""

    segment: int
    start: int
    end: int
    new_segment: bool


class SegmentAssembler:
    """Places calls, in the order their answers arrived, into segments."""

    def __init__(self) -> None:
        self.segments: list[OpenSegment] = []

    def _continued(self, prompt: np.ndarray) -> int | None:
        """The longest segment that is a prefix of ``prompt`` (the latest on a tie)."""
        best, best_length = None, -1
        for index, segment in enumerate(self.segments):
            n = len(segment.token_ids)
            if n > len(prompt) or n < best_length:
                continue
            if np.array_equal(prompt[:n], np.asarray(segment.token_ids, dtype=prompt.dtype)):
                best, best_length = index, n
        return best

    def place(
        self, prompt_ids: list[int], completion_ids: list[int], logprobs: list[float] | None
    ) -> Placement:
        prompt = np.asarray(prompt_ids, dtype=np.int64)
        index = self._continued(prompt) if len(prompt) else None
        new_segment = index is None
        if index is None:
            self.segments.append(OpenSegment())
            index = len(self.segments) - 1
        segment = self.segments[index]
        fresh = prompt_ids[len(segment.token_ids) :]
        segment.token_ids.extend(fresh)
        segment.agent_mask.extend([0] * len(fresh))
        segment.logprobs.extend([0.0] * len(fresh))
        start = len(segment.token_ids)
        segment.token_ids.extend(completion_ids)
        segment.agent_mask.extend([1] * len(completion_ids))
        segment.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(completion_ids))
        return Placement(index, start, len(segment.token_ids), new_segment)
