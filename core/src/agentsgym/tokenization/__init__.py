"""Token streams of episodes: chat-template rendering, turn deltas, token fidelity.

* :mod:`~agentsgym.tokenization.chat`: :class:`ChatTokenizer`, a tokenizer and what
  its chat template puts around turns;
* :mod:`~agentsgym.tokenization.incremental`: env turns as a delta against a small
  base conversation, so a turn costs its own new messages;
* :mod:`~agentsgym.tokenization.stream`: :class:`EpisodeTokenizer`, an episode's
  segments built turn by turn, with the checks that keep them what the model saw.
"""

from agentsgym.tokenization.chat import ChatTokenizer, tokenizer_lock
from agentsgym.tokenization.incremental import supports_incremental
from agentsgym.tokenization.stream import AgentSpan, EpisodeTokenizer, SegmentBuilder

__all__ = [
    "AgentSpan",
    "ChatTokenizer",
    "EpisodeTokenizer",
    "SegmentBuilder",
    "supports_incremental",
    "tokenizer_lock",
]
