"""Gateway sessions: one per agent program, found by an unguessable key.

A program presents its key as ``Authorization: Bearer <key>`` (what ``OPENAI_API_KEY``
becomes in every OpenAI client) or in a path prefix ``/s/<key>/v1/...`` (for programs
that cannot set a key). The store keeps only a hash of each key, so neither a record
nor a log line ever holds one, and a request reaches only the session its key opens.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
import threading
from dataclasses import dataclass, field

from agentsgym import EpisodeContext
from agentsgym_gateway.records import CallRecord

KEY_BYTES = 32
"""256 random bits per key (``secrets.token_urlsafe``): not guessable."""
KEY_PREFIX = "agw-"


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass
class GatewaySession:
    """The calls of one program, in the order their answers arrived. Once closed it
    takes no more: a call still in flight then is not recorded, and its program is told
    so (:meth:`add` says whether the records were taken)."""

    session_id: str
    calls: list[CallRecord] = field(default_factory=list)
    closed: bool = False
    context: EpisodeContext | None = None
    """The episode the program plays (a harness env's), which an agent backend hands its
    agent with each call."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def call_context(self) -> EpisodeContext | None:
        """The episode's context for the session's next call: its ``step`` is the number
        of calls answered so far."""
        if self.context is None:
            return None
        return dataclasses.replace(self.context, step=len(self.calls))

    def add(self, *records: CallRecord) -> bool:
        """Record one call's records (one per choice) together, unless the session closed
        first: then none is, and False says the program must not get the answer."""
        with self._lock:
            if self.closed:
                return False
            for record in records:
                record.index = len(self.calls)
                self.calls.append(record)
        return True

    def close(self) -> list[CallRecord]:
        """Take no more calls; the calls recorded, every one the program was answered."""
        with self._lock:
            self.closed = True
            return list(self.calls)


class SessionStore:
    """Open sessions by the hash of their key; thread-safe."""

    def __init__(self) -> None:
        self._by_digest: dict[str, GatewaySession] = {}
        self._lock = threading.Lock()

    def open(
        self, session_id: str | None = None, context: EpisodeContext | None = None
    ) -> tuple[GatewaySession, str]:
        """A new session and its key; the key is returned once and never stored."""
        key = KEY_PREFIX + secrets.token_urlsafe(KEY_BYTES)
        session = GatewaySession(session_id or secrets.token_hex(8), context=context)
        with self._lock:
            self._by_digest[_digest(key)] = session
        return session, key

    def find(self, key: str | None) -> GatewaySession | None:
        """The open session of ``key``, or ``None`` (unknown, closed or missing key)."""
        if not key:
            return None
        session = self._by_digest.get(_digest(key))
        return None if session is None or session.closed else session

    def close(self, key: str) -> list[CallRecord] | None:
        """Stop accepting calls for ``key``; its calls (``None``: no such session)."""
        with self._lock:
            session = self._by_digest.pop(_digest(key), None)
        return None if session is None else session.close()

    def __len__(self) -> int:
        return len(self._by_digest)
