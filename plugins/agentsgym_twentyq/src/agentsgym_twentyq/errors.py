"""Errors of agentsgym-twentyq, in the agentsgym hierarchy."""

from __future__ import annotations

from agentsgym.errors import EpisodeError


class GamemasterError(EpisodeError):
    """The gamemaster could not answer a question: its agent raised (server down, a
    timeout after its retries, a broken agent) or it broke the gamemaster protocol.

    The episode fails with it rather than go on with an answer the gamemaster never
    gave: a reward earned against made-up answers is wrong training data. The runner
    records it on the episode, ``--max-failure-rate`` counts it, and trainers leave the
    episode out. A reply that is merely unclear ("Yes and no") is not an error: it is
    read as "I don't know" (see :mod:`agentsgym_twentyq.agent_gamemaster`).
    """
