"""CallStream: token segments from a model server's calls, for a producer that has only
its calls (a model gateway records the prompt ids each call was conditioned on and the
ids it sampled; no chat stream of the episode's own exists).

A call continues a segment when its prompt ids begin with that segment's ids (the
previous prompt plus its completion, plus the new turns): the new prompt ids are env
tokens, the completion agent tokens. When no segment is a prefix of its prompt (the
program dropped or summarized its history, changed its system prompt, or ran this
call beside another one), the call starts a new segment from its own prompt, all of it
env tokens: a completion is an agent token exactly once, in the segment where it was
sampled, so nothing sampled is trained twice and nothing is silently mismatched.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentsgym.tokenization.stream import AgentSpan, SegmentBuilder


class CallStream:
    """Places calls, in the order their answers arrived, into segments."""

    def __init__(self) -> None:
        self.segments: list[SegmentBuilder] = []
        self.has_logprobs = True
        """Every call placed so far came with its sampled logprobs."""
        self._last: int | None = None
        """The segment of the call placed last."""

    def _continued(self, prompt_ids: Sequence[int]) -> int | None:
        """The longest segment that is a prefix of ``prompt_ids`` (the latest on a tie)."""
        best, best_length = None, -1
        for index, segment in enumerate(self.segments):
            held = segment.token_ids
            n = len(held)
            if n > len(prompt_ids) or n < best_length:
                continue
            if list(prompt_ids[:n]) == held:
                best, best_length = index, n
        return best

    def place(
        self,
        prompt_ids: Sequence[int],
        completion_ids: Sequence[int],
        logprobs: Sequence[float] | None,
        token_source: str,
    ) -> tuple[AgentSpan, bool]:
        """Where the call's completion landed, and whether the call began a new segment."""
        index = self._continued(prompt_ids) if len(prompt_ids) else None
        new_segment = index is None
        if index is None:
            self.segments.append(SegmentBuilder())
            index = len(self.segments) - 1
        segment = self.segments[index]
        segment.extend([int(i) for i in prompt_ids[len(segment) :]], agent=False)
        start = len(segment)
        segment.extend([int(i) for i in completion_ids], agent=True, logprobs=logprobs)
        if logprobs is None:
            self.has_logprobs = False
        positions = list(range(start, len(segment)))
        self._last = index
        return AgentSpan(index, positions, token_source), new_segment

    def finish(self, closing_ids: Sequence[int]) -> None:
        """End the segment of the last call with ``closing_ids``, as context: what the
        template writes after the final reply (ChatML's newline after its end of turn),
        so a stream of calls ends as a chat stream does (``EpisodeTokenizer.finish``)."""
        if self._last is not None and closing_ids:
            self.segments[self._last].extend([int(i) for i in closing_ids], agent=False)
