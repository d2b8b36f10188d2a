"""Token streams of episodes: chat-template rendering (:mod:`.chat`), cheap turn deltas
(:mod:`.incremental`) and the per-episode stream with its fidelity checks (:mod:`.stream`)."""

from agentsgym.tokenization.chat import ChatTokenizer, tokenizer_lock
from agentsgym.tokenization.incremental import reply_as_rendered, supports_incremental
from agentsgym.tokenization.stream import AgentSpan, EpisodeTokenizer, SegmentBuilder

__all__ = [
    "AgentSpan",
    "ChatTokenizer",
    "EpisodeTokenizer",
    "SegmentBuilder",
    "reply_as_rendered",
    "supports_incremental",
    "tokenizer_lock",
]
