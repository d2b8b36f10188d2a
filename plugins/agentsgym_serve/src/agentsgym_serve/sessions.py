"""The session table: ids that are never reused, one lock per session, idle sessions.

A session is one env instance's worth of state on the server: the current episode
(the core's :class:`~agentsgym.engine.EpisodeSession` that plays it) plus the last
reply of each kind, kept so that a retried call is answered again instead of applied
twice.

* Ids are a random base, drawn when the table is made, plus a counter for the
  table's lifetime. AgentGym's servers recycled theirs, and counted from 0 again
  after a restart, so a late call (or a client holding an id from before the
  restart; that protocol has no tokens) could land on someone else's episode. Here
  an id is never reused, and an id from before a restart is unknown to the new
  server (its range starts elsewhere), not another client's session. Ids stay JSON
  integers below 2**53, which every JSON client reads exactly. A closed session
  leaves a *tombstone* (why it closed, its last finish reply) so that a late or
  retried call on it is told "closed", never "unknown", and never reaches another.
* Each session has an ``asyncio.Lock``: calls on one session run one at a time, in
  arrival order; calls on different sessions run concurrently.
* ``max_sessions`` bounds the live sessions; past it ``create`` raises
  :class:`~agentsgym_serve.errors.ServerFull` (a 503).
* A session nobody has called for ``idle_timeout`` seconds (and that no call is
  waiting on) is returned by :meth:`SessionTable.idle` for the server to close.

The table is used from the server's event loop; the id counter also takes a thread
lock, so creating sessions from threads (tests, benchmarks) is safe too.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agentsgym import Messages
from agentsgym_serve.errors import (
    IdsExhausted,
    ServerFull,
    SessionClosed,
    UnknownSession,
    WrongProtocol,
)

if TYPE_CHECKING:
    from agentsgym.runtime import EpisodeSession, Players

Origin = Literal["agentgym", "agentsgym", "openenv"]
DEFAULT_MAX_SESSIONS = 1024
DEFAULT_IDLE_TIMEOUT = 600.0
DEFAULT_TOMBSTONES = 65_536

ID_FLOOR = 1 << 48
"""The smallest id: far above the ids servers that count from 0 hand out."""
ID_CEILING = 1 << 53
"""Ids stay below it: JSON numbers that JavaScript (doubles) still reads exactly."""
IDS_PER_TABLE = 1 << 40
"""The ids one table can hand out (a million a second for twelve days)."""

_claimed_bases: list[int] = []
_claim_lock = threading.Lock()


def draw_id_base() -> int:
    """A random first id whose range overlaps no other table's of this process.

    Tables of one process never share an id. Two processes (a server and its restart)
    draw independently: when each hands out n ids, their ranges overlap with a chance
    of about 2n / 2**53 (2**-22 for a billion ids each).
    """
    with _claim_lock:
        while True:
            base = ID_FLOOR + secrets.randbelow(ID_CEILING - IDS_PER_TABLE - ID_FLOOR)
            if all(abs(base - other) >= IDS_PER_TABLE for other in _claimed_bases):
                _claimed_bases.append(base)
                return base


@dataclass(eq=False)
class Session:
    """One session: its identity, its lock, its current episode and its last replies."""

    id: int
    token: str
    origin: Origin
    config_key: str
    created: float
    last_used: float
    request_id: str | None = None
    hosted: Any = None  # the HostedEnv this session plays
    on_close: Callable[[str], None] | None = None  # told the reason when the server closes it
    created_reply: dict[str, Any] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    active: int = 0  # calls running or waiting for the lock: never reaped while > 0
    # the current episode: its number, the core's session playing it, what was said of it
    episode: int = 0
    play: EpisodeSession | None = None  # None before the first episode
    session_id: str = ""
    failed: str | None = None
    observation: str = ""
    prompt: str = ""  # the episode's first prompt, as text
    transcript: str = ""  # the episode's env text so far (OpenEnv's textarena shape)
    score: float = 0.0  # the episode's rewards so far (AgentGym's `score`)
    # an env with roles: the role the client plays, the server's agents that play the
    # others (the current episode's) and their states by role, kept across the episodes
    # of one task (a local trial's), started afresh for another task
    role: str | None = None
    players: Players | None = None
    agent_states: dict[str | None, Any] = field(default_factory=dict)
    agents_task: dict[str, Any] | None = None  # the task the agents' states are of
    # the last reply of each kind, for retries: (episode, step, action, reply)
    last_reset: tuple[int, dict[str, Any]] | None = None
    last_step: tuple[int, int, Any, dict[str, Any]] | None = None
    last_finish: tuple[int, dict[str, Any]] | None = None

    @property
    def steps_taken(self) -> int:
        """Actions applied in the current episode (the client's role's, with roles)."""
        return len(self.play.view(self.role).steps) if self.play is not None else 0

    @property
    def done(self) -> bool:
        """The env ended the current episode."""
        return self.play is not None and self.play.done

    @property
    def truncated(self) -> bool:
        """The step limit (or the client) ended the current episode."""
        return self.play is not None and self.play.truncated

    @property
    def finished(self) -> bool:
        """finish_episode ran for the current episode."""
        return self.play is not None and self.play.finished

    @property
    def messages(self) -> Messages:
        """The current episode's conversation (tool calls and results included); with
        roles, the client's role's."""
        return self.play.view(self.role).messages if self.play is not None else []


@dataclass(frozen=True)
class Tombstone:
    """What is left of a closed session."""

    reason: str
    token: str
    last_finish: tuple[int, dict[str, Any]] | None


class SessionTable:
    """Live sessions by id, tombstones of closed ones, and the id counter.

    :param id_base: the first id; by default a random one (:func:`draw_id_base`).
    """

    def __init__(
        self,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        *,
        max_tombstones: int = DEFAULT_TOMBSTONES,
        clock: Callable[[], float] = time.monotonic,
        id_base: int | None = None,
    ) -> None:
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {max_sessions}")
        if idle_timeout <= 0:
            raise ValueError(f"idle_timeout must be positive, got {idle_timeout}")
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self.max_tombstones = max_tombstones
        self.clock = clock
        self.id_base = draw_id_base() if id_base is None else id_base
        self._id_lock = threading.Lock()
        self._next_id = self.id_base
        self.live: dict[int, Session] = {}
        self.tombstones: OrderedDict[int, Tombstone] = OrderedDict()
        self._by_request: OrderedDict[str, int] = OrderedDict()
        self.created_total = 0
        self.closed_total = 0

    def __len__(self) -> int:
        return len(self.live)

    # ------------------------------------------------------------------ create
    def create(
        self, origin: Origin, config_key: str, request_id: str | None = None
    ) -> tuple[Session, bool]:
        """A new session, or the one an earlier call with ``request_id`` created
        (``(session, False)``). Past ``max_sessions``: :class:`ServerFull`."""
        if request_id is not None and request_id in self._by_request:
            earlier = self._by_request[request_id]
            session = self.live.get(earlier)
            if session is not None:
                return session, False
            raise SessionClosed(
                f"session {earlier}, created by an earlier call with request_id "
                f"{request_id!r}, is closed ({self._reason(earlier)}); create with a new "
                "request_id",
                id=earlier,
            )
        if len(self.live) >= self.max_sessions:
            raise ServerFull(
                f"the server holds its maximum of {self.max_sessions} sessions "
                "(--max-sessions); close finished sessions or retry later",
                max_sessions=self.max_sessions,
                sessions=len(self.live),
            )
        session_number = self._new_id()
        now = self.clock()
        session = Session(
            id=session_number,
            token=secrets.token_hex(16),
            origin=origin,
            config_key=config_key,
            created=now,
            last_used=now,
            request_id=request_id,
        )
        self.live[session.id] = session
        if request_id is not None:
            self._remember_request(request_id, session.id)
        self.created_total += 1
        return session, True

    def _new_id(self) -> int:
        with self._id_lock:
            number = self._next_id
            if number - self.id_base >= IDS_PER_TABLE:
                raise IdsExhausted(
                    f"this server has handed out all of its {IDS_PER_TABLE} session ids; restart it"
                )
            self._next_id = number + 1
        return number

    def _remember_request(self, request_id: str, session_id: int) -> None:
        self._by_request[request_id] = session_id
        while len(self._by_request) > self.max_tombstones + self.max_sessions:
            self._by_request.popitem(last=False)

    # ------------------------------------------------------------------ lookup
    def get(self, session_id: int, token: str | None = None) -> Session:
        """The live session ``session_id``.

        ``token=None`` is a call of AgentGym's protocol, which has no tokens: it may
        reach only sessions created through that protocol. A wrong token is
        answered as an unknown session (it must not reveal which ids are live).
        """
        session = self.live.get(session_id)
        if session is not None:
            if token is None:
                if session.origin == "agentsgym":
                    raise WrongProtocol(
                        f"session {session_id} was created through /agentsgym/v1 and is "
                        "reached only there, with its token"
                    )
                if session.origin == "openenv":
                    raise WrongProtocol(
                        f"session {session_id} is an OpenEnv WebSocket session (/ws) and is "
                        "reached only over its connection"
                    )
                return session
            if _same_token(session.token, token):
                return session
            raise UnknownSession(f"no session {session_id} with this token")
        if self.id_base <= session_id < self._next_id:
            raise SessionClosed(
                f"session {session_id} is closed ({self._reason(session_id)}); create a new one",
                id=session_id,
            )
        raise UnknownSession(
            f"no session {session_id}: this server never created it (an id from before a "
            "server restart is unknown to the new server); create one first"
        )

    def tombstone(self, session_id: int, token: str) -> Tombstone | None:
        """The tombstone of a closed session, for the holder of its token."""
        stone = self.tombstones.get(session_id)
        if stone is not None and _same_token(stone.token, token):
            return stone
        return None

    def _reason(self, session_id: int) -> str:
        stone = self.tombstones.get(session_id)
        return stone.reason if stone is not None else "closed long ago"

    # ------------------------------------------------------------------ closing
    def close(self, session: Session, reason: str) -> bool:
        """Remove a live session, leaving a tombstone; False if it was already gone."""
        if self.live.pop(session.id, None) is None:
            return False
        self.tombstones[session.id] = Tombstone(reason, session.token, session.last_finish)
        while len(self.tombstones) > self.max_tombstones:
            self.tombstones.popitem(last=False)
        self.closed_total += 1
        return True

    def touch(self, session: Session) -> None:
        session.last_used = self.clock()

    def idle(self) -> list[Session]:
        """Live sessions unused for ``idle_timeout`` seconds that no call is waiting on."""
        cutoff = self.clock() - self.idle_timeout
        return [s for s in self.live.values() if s.active == 0 and s.last_used <= cutoff]

    @property
    def next_id(self) -> int:
        return self._next_id


def _same_token(issued: str, given: str) -> bool:
    # compare_digest refuses non-ASCII str; bytes take any text a client may send.
    return secrets.compare_digest(issued.encode(), given.encode("utf-8", "surrogatepass"))
