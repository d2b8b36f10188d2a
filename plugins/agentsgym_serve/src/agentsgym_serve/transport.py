"""HTTP calls to an env server, retried where that is safe, and always bounded.

Whether a failed call may be sent again depends on what the server may have done:

* the request **was never sent** (connection refused, connect timeout, no free
  connection in the pool): always safe to retry;
* the request **may have been applied** (the connection dropped or timed out after
  sending, a 5xx reply): safe only for an *idempotent* call. agentsgym/v1 calls are
  all idempotent, because the server recognises a repeat by its counters and
  answers it without applying it again; of AgentGym's calls only ``/reset``
  (starting a task again is the same start), ``/observation`` and ``/close`` are;
* the server **refused** (a 4xx): never retried, the reply says why.

A 503 (the server is full, or a gateway has no server) means nothing was done, so it
is retried for any call, after the server's ``Retry-After``. Every call makes at most
``max_attempts`` attempts, each within its own timeout, with exponential backoff and
jitter between them, and stops early at its deadline: it ends in a reply or a
:class:`RemoteCallError`, never in a hang.

Episode calls go through aiohttp, one session (one connection pool) per event loop:
httpx's async client spent about 1.5 ms of CPU per request against aiohttp's 0.4 ms
(bench/bench_serve.py), and a remote env makes one request per turn. The few calls
of an env's constructor use httpx's blocking client.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
import weakref
from dataclasses import dataclass
from enum import Enum
from typing import Any

import aiohttp
import httpx

from agentsgym.errors import RemoteEnvError
from agentsgym_serve.urls import redact_url

logger = logging.getLogger("agentsgym_serve.client")

CLIENT_KEEP_ALIVE_SECONDS = 4.0
"""Idle connections are dropped by the client after this long: before the server's own
keep-alive ends (uvicorn's default is 5 s, agentsgym serve's 30 s), so a request never
goes out on a connection the server is closing, which would look like a dropped
reply and, for a call that cannot be repeated, fail its episode."""


class Retry(Enum):
    """Which failures a call may be retried after (see the module docstring)."""

    IDEMPOTENT = "idempotent"  # any transport failure, 5xx
    UNSENT = "unsent"  # only failures before the request left (and 503)


@dataclass(frozen=True)
class RetryPolicy:
    """How hard a remote env tries before a call fails (and its episode with it).

    :param max_attempts: attempts per call, the first included.
    :param backoff: seconds before the first retry; doubled for each next one.
    :param max_backoff: the longest wait between two attempts.
    :param connect_timeout: seconds to open a connection.
    :param request_timeout: seconds to wait for a reply, per attempt. ``None``: the
        env's ``hook_timeout_seconds`` (a step takes as long as the env's hooks).
    :param max_connections: connections to the server at most, per event loop.
    """

    max_attempts: int = 6
    backoff: float = 0.1
    max_backoff: float = 2.0
    connect_timeout: float = 5.0
    request_timeout: float | None = None
    max_connections: int = 1024

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if self.backoff < 0 or self.max_backoff < 0:
            raise ValueError("backoff and max_backoff must not be negative")
        if self.connect_timeout <= 0 or (
            self.request_timeout is not None and self.request_timeout <= 0
        ):
            raise ValueError("timeouts must be positive")

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (from 1)."""
        base = min(self.max_backoff, self.backoff * (2 ** (attempt - 1)))
        wait = base * random.uniform(0.5, 1.0)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_backoff))
        return wait


class RemoteCallError(RemoteEnvError):
    """A call to an env server that failed: the server's status and error code when it
    answered (``status`` 0 when it did not)."""

    def __init__(
        self, message: str, *, status: int = 0, code: str | None = None, detail: str = ""
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.detail = detail or message


class _Attempt(Exception):
    """One failed attempt, and whether another may follow."""

    def __init__(self, reason: str, *, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.retry_after = retry_after


def encode(body: Any) -> bytes:
    """ASCII JSON: a lone surrogate in an action travels as its escape, unchanged."""
    return json.dumps(body, ensure_ascii=True, separators=(",", ":")).encode("ascii")


class Transport:
    """Calls one env server (see the module docstring); sync and async, one client per
    event loop (a connection pool belongs to the loop that made it)."""

    def __init__(self, base_url: str, policy: RetryPolicy | None = None) -> None:
        self.httpx = httpx
        self.aiohttp = aiohttp
        self.base_url = base_url
        self.policy = policy or RetryPolicy()
        self._sessions: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self._sync_client: Any = None
        # An env dropped without close() (or alive at exit) still closes its sessions.
        weakref.finalize(self, _discard_sessions, self._sessions)

    # ------------------------------------------------------------------ clients
    def _session(self) -> Any:
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            aiohttp = self.aiohttp
            connector = aiohttp.TCPConnector(
                limit=self.policy.max_connections,
                keepalive_timeout=CLIENT_KEEP_ALIVE_SECONDS,
            )
            session = aiohttp.ClientSession(connector=connector)
            self._sessions[loop] = session
        return session

    def _client(self) -> Any:
        if self._sync_client is None:
            httpx = self.httpx
            self._sync_client = httpx.Client(
                base_url=self.base_url,
                limits=httpx.Limits(keepalive_expiry=CLIENT_KEEP_ALIVE_SECONDS),
            )
        return self._sync_client

    def close(self) -> None:
        """Close the blocking client and every event loop's connections."""
        if self._sync_client is not None:
            self._sync_client.close()
            self._sync_client = None
        _discard_sessions(self._sessions)

    async def aclose(self) -> None:
        """Close this loop's async session."""
        session = self._sessions.pop(asyncio.get_running_loop(), None)
        if session is not None:
            await session.close()

    # ------------------------------------------------------------------ calls
    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        retry: Retry,
        timeout: float,
        params: dict[str, Any] | None = None,
    ) -> Any:
        """The parsed JSON reply of ``method path``; a RemoteCallError when it fails."""
        aiohttp = self.aiohttp
        deadline = time.monotonic() + self._budget(timeout)
        content = encode(body) if body is not None else None
        url = self.base_url + path
        last = ""
        for attempt in range(1, self.policy.max_attempts + 1):
            seconds = self._attempt_timeout(timeout, deadline)
            limits = aiohttp.ClientTimeout(
                total=seconds, connect=min(self.policy.connect_timeout, seconds)
            )
            try:
                async with self._session().request(
                    method,
                    url,
                    data=content,
                    params=params,
                    headers=_HEADERS if content is not None else None,
                    timeout=limits,
                ) as response:
                    payload = await response.read()
                    status, headers = response.status, response.headers
                return self._reply(method, path, status, payload, headers, retry)
            except _Attempt as failed:
                last = failed.reason
                wait = self._next(method, path, attempt, failed, deadline)
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                failed = self._aiohttp_failure(exc, retry)
                last = failed.reason
                wait = self._next(method, path, attempt, failed, deadline)
            await asyncio.sleep(wait)
        raise self._gave_up(method, path, last)

    def call_sync(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        retry: Retry,
        timeout: float,
        params: dict[str, Any] | None = None,
    ) -> Any:
        """:meth:`call` for plain code (an env's constructor)."""
        deadline = time.monotonic() + self._budget(timeout)
        content = encode(body) if body is not None else None
        last = ""
        for attempt in range(1, self.policy.max_attempts + 1):
            seconds = self._attempt_timeout(timeout, deadline)
            try:
                response = self._client().request(
                    method,
                    path,
                    content=content,
                    params=params,
                    headers=_HEADERS if content is not None else None,
                    timeout=self.httpx.Timeout(
                        seconds, connect=min(self.policy.connect_timeout, seconds)
                    ),
                )
                return self._reply(
                    method, path, response.status_code, response.content, response.headers, retry
                )
            except _Attempt as failed:
                last = failed.reason
                wait = self._next(method, path, attempt, failed, deadline)
            except self.httpx.HTTPError as exc:
                failed = self._httpx_failure(exc, retry)
                last = failed.reason
                wait = self._next(method, path, attempt, failed, deadline)
            time.sleep(wait)
        raise self._gave_up(method, path, last)

    # ------------------------------------------------------------------ policy
    def _budget(self, timeout: float) -> float:
        """A call's whole budget: its attempts' timeouts (connecting included) and the
        longest waits between them. A backstop: attempts and their timeouts end a call
        first, unless the machine is too slow to notice its own timeouts in time."""
        waits = sum(
            min(self.policy.max_backoff, self.policy.backoff * 2**i)
            for i in range(self.policy.max_attempts - 1)
        )
        per_attempt = (self.policy.request_timeout or timeout) + self.policy.connect_timeout
        return per_attempt * self.policy.max_attempts + waits

    def _attempt_timeout(self, timeout: float, deadline: float) -> float:
        per_attempt = self.policy.request_timeout or timeout
        return max(0.05, min(per_attempt, deadline - time.monotonic()))

    def _next(
        self, method: str, path: str, attempt: int, failed: _Attempt, deadline: float
    ) -> float:
        """The wait before the next attempt; raises when there is none."""
        if isinstance(failed, _Refused):
            raise failed.error
        if not failed.retryable:
            raise self._gave_up(method, path, failed.reason, attempts=attempt)
        wait = self.policy.delay(attempt, failed.retry_after)
        if attempt >= self.policy.max_attempts or time.monotonic() + wait >= deadline:
            raise self._gave_up(method, path, failed.reason, attempts=attempt)
        logger.info(
            "retrying %s %s in %.2f s (attempt %d failed: %s)",
            method,
            redact_url(self.base_url + path),
            wait,
            attempt,
            failed.reason,
        )
        return wait

    def _gave_up(
        self, method: str, path: str, reason: str, attempts: int | None = None
    ) -> RemoteCallError:
        tries = f" after {attempts} attempt{'s' if attempts != 1 else ''}" if attempts else ""
        return RemoteCallError(
            f"{method} {redact_url(self.base_url + path)} failed{tries}: {reason}"
        )

    def _httpx_failure(self, exc: Exception, retry: Retry) -> _Attempt:
        httpx = self.httpx
        unsent = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout))
        return _failure(exc, retry, unsent=unsent, transport=isinstance(exc, httpx.TransportError))

    def _aiohttp_failure(self, exc: Exception, retry: Retry) -> _Attempt:
        aiohttp = self.aiohttp
        unsent = isinstance(exc, (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError))
        transport = isinstance(exc, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError))
        return _failure(
            exc, retry, unsent=unsent, transport=transport or isinstance(exc, asyncio.TimeoutError)
        )

    def _reply(
        self, method: str, path: str, status: int, content: bytes, headers: Any, retry: Retry
    ) -> Any:
        if status < 300:
            try:
                return json.loads(content)
            except ValueError:
                raise _Refused(
                    RemoteCallError(
                        f"{method} {redact_url(self.base_url + path)} answered {status} with a "
                        f"body that is not JSON: {content[:200]!r}",
                        status=status,
                    )
                ) from None
        code, detail = _error_of(content)
        reason = f"HTTP {status}" + (f" {code}" if code else "") + (f": {detail}" if detail else "")
        if status == 503:
            raise _Attempt(reason, retryable=True, retry_after=_retry_after(headers))
        if status >= 500:
            if retry is Retry.UNSENT:
                reason += " (not retried: the server may have applied it)"
            raise _Attempt(reason, retryable=retry is Retry.IDEMPOTENT)
        raise _Refused(
            RemoteCallError(
                f"{method} {redact_url(self.base_url + path)} was refused: {reason}",
                status=status,
                code=code,
                detail=detail,
            )
        )


def _discard_sessions(sessions: weakref.WeakKeyDictionary[Any, Any]) -> None:
    """Close aiohttp sessions from plain code, whatever state their loops are in.

    ``ClientSession.close()`` is a coroutine, and the loop it belongs to may be running
    in another thread (the runner's background loop), not running, or closed. The
    session is detached (marked closed) here and its connector's synchronous close
    runs on the loop's thread when that loop is running elsewhere, directly otherwise.
    """
    for loop, session in list(sessions.items()):
        sessions.pop(loop, None)
        connector = session.connector
        session.detach()
        if connector is None:
            continue
        try:
            if loop.is_running() and asyncio._get_running_loop() is not loop:
                loop.call_soon_threadsafe(connector._close)
            else:
                connector._close()
        except Exception:  # closing must never mask what the caller is doing
            logger.debug("closing an HTTP connection pool failed", exc_info=True)


def _failure(exc: Exception, retry: Retry, *, unsent: bool, transport: bool) -> _Attempt:
    """What a transport exception means for a retry (see the module docstring)."""
    reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if unsent:
        return _Attempt(reason, retryable=True)
    if transport:  # dropped, reset, timed out after sending: maybe applied
        if retry is Retry.UNSENT:
            reason += " (not retried: the server may have applied it)"
        return _Attempt(reason, retryable=retry is Retry.IDEMPOTENT)
    return _Attempt(reason, retryable=False)


class _Refused(_Attempt):
    """The server answered and said no: raised to the caller as it is."""

    def __init__(self, error: RemoteCallError) -> None:
        super().__init__(str(error), retryable=False)
        self.error = error


_HEADERS = {"content-type": "application/json"}


def _error_of(content: bytes) -> tuple[str | None, str]:
    try:
        body = json.loads(content)
    except ValueError:
        return None, content[:500].decode("utf-8", "replace")
    if isinstance(body, dict):
        code = body.get("error") if isinstance(body.get("error"), str) else None
        detail = body.get("detail")
        if detail is None and code is None:
            return None, json.dumps(body)[:500]
        text = detail if isinstance(detail, str) else json.dumps(detail)[:1000]
        return code, text
    return None, json.dumps(body)[:500]


def _retry_after(headers: Any) -> float | None:
    try:
        return float(headers.get("retry-after", ""))
    except (TypeError, ValueError):
        return None
