"""What an Atropos producer did: the groups it played, pushed and left."""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_MAX_DROPPED_IN_A_ROW = 20
"""Groups in a row dropped for a failed episode after which a producer stops."""


@dataclass
class ProducerStats:
    """What a producer did (also logged). Every group started ends up in exactly one
    of pushed, dropped, discarded or :attr:`groups_unfinished`."""

    groups_started: int = 0
    groups_pushed: int = 0
    sequences_pushed: int = 0
    groups_dropped: int = 0
    """Not pushed: an episode failed (GRPO needs whole groups)."""
    groups_discarded: int = 0
    """Played to the end but not pushed: the producer stopped (an outage longer than
    the window, the trainer's last step) before the push went through."""
    pauses: int = 0
    registrations: int = 0
    """Times the producer registered: 1, and one more after each restart of the API
    server (a restarted server has forgotten the env)."""
    retries: int = 0
    """Requests sent again after a connection error, a timeout or HTTP 5xx."""
    episodes_failed: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def groups_unfinished(self) -> int:
        """Groups still being played when the producer stopped."""
        done = self.groups_pushed + self.groups_dropped + self.groups_discarded
        return max(0, self.groups_started - done)
