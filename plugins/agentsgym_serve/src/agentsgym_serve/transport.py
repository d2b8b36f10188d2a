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
is retried for any call, after the server's ``Retry-After``. A call that may be
retried is retried, with exponential backoff and jitter, for as long as its
``retry_window`` lasts (60 s by default: long enough for a server or gateway to
restart), each attempt within its own timeout: it ends in a reply or a
:class:`RemoteCallError` saying what failed and for how long it was tried, never
in a hang.

Episode calls go through aiohttp, one session (one connection pool) per event loop:
httpx's async client spent about 1.5 ms of CPU per request against aiohttp's 0.4 ms
(bench/bench_serve.py), and a remote env makes one request per turn. The few calls
of an env's constructor use httpx's blocking client. Every pool is closed on its
own loop: by ``close()``/``aclose()``, when the env is dropped or the process exits,
and when ``asyncio.run`` ends the loop it was made on (a loop closes its async
generators as it ends, and each pool has one parked on its loop for that).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import random
import time
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import aiohttp
import httpx

from agentsgym.errors import EnvConfigError, RemoteEnvError
from agentsgym.redaction import redact_text

logger = logging.getLogger("agentsgym_serve.client")

CLIENT_KEEP_ALIVE_SECONDS = 4.0
"""Idle connections are dropped by the client after this long: before the server's own
keep-alive ends (uvicorn's default is 5 s, agentsgym serve's 30 s), so a request never
goes out on a connection the server is closing, which would look like a dropped
reply and, for a call that cannot be repeated, fail its episode."""


CLOSE_TIMEOUT_SECONDS = 5.0
"""How long closing waits for a pool's own loop (running in another thread) to close it."""

RETRY_WINDOW_KEY = "retry_window_seconds"
"""The env_config key of a remote env's retry window (taken by the client, not sent)."""


class Retry(Enum):
    """Which failures a call may be retried after (see the module docstring)."""

    IDEMPOTENT = "idempotent"  # any transport failure, 5xx
    UNSENT = "unsent"  # only failures before the request left (and 503)


@dataclass(frozen=True)
class RetryPolicy:
    """How hard a remote env tries before a call fails (and its episode with it).

    :param retry_window: seconds after a call's first attempt during which a failure
        that may be retried is retried: no attempt starts later, so a call ends
        within this window plus one attempt's timeout. The default rides out a
        server or gateway restart.
    :param max_attempts: attempts per call at most, the first included (``None``:
        as many as the window holds).
    :param backoff: seconds before the first retry; doubled for each next one.
    :param max_backoff: the longest wait between two attempts.
    :param connect_timeout: seconds to open a connection.
    :param request_timeout: seconds to wait for a reply, per attempt. ``None``: the
        env's ``hook_timeout_seconds`` (a step takes as long as the env's hooks).
    :param max_connections: connections to the server at most, per event loop.
    """

    retry_window: float = 60.0
    max_attempts: int | None = None
    backoff: float = 0.1
    max_backoff: float = 2.0
    connect_timeout: float = 5.0
    request_timeout: float | None = None
    max_connections: int = 1024

    def __post_init__(self) -> None:
        if self.retry_window < 0:
            raise ValueError(f"retry_window must not be negative, got {self.retry_window}")
        if self.max_attempts is not None and self.max_attempts < 1:
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


def client_policy(policy: RetryPolicy | None, retry_window_seconds: Any = None) -> RetryPolicy:
    """``policy`` (or the default one) with the retry window an env_config asked for."""
    policy = policy or RetryPolicy()
    if retry_window_seconds is None:
        return policy
    if (
        isinstance(retry_window_seconds, bool)
        or not isinstance(retry_window_seconds, (int, float))
        or not retry_window_seconds >= 0
    ):
        raise EnvConfigError(
            f"env_config {RETRY_WINDOW_KEY} must be a number of seconds >= 0 (how long a "
            f"failed call to the server is retried), got {retry_window_seconds!r}"
        )
    return dataclasses.replace(policy, retry_window=float(retry_window_seconds))


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


@dataclass
class _Pools:
    """A transport's connections, apart from it, so that its finalizer can close them:
    per event loop, an aiohttp session and the guard parked on that loop."""

    sessions: dict[Any, tuple[Any, Any]] = field(default_factory=dict)
    sync_client: Any = None


class Transport:
    """Calls one env server (see the module docstring); sync and async, one client per
    event loop (a connection pool belongs to the loop that made it)."""

    def __init__(self, base_url: str, policy: RetryPolicy | None = None) -> None:
        self.httpx = httpx
        self.aiohttp = aiohttp
        self.base_url = base_url
        self.policy = policy or RetryPolicy()
        self._pools = _Pools()
        # An env dropped without close() (or alive at exit) still closes its pools.
        weakref.finalize(self, _close_pools, self._pools)

    # ------------------------------------------------------------------ clients
    async def _session(self) -> Any:
        loop = asyncio.get_running_loop()
        entry = self._pools.sessions.get(loop)
        if entry is not None and not entry[0].closed:
            return entry[0]
        if entry is not None:  # closed under us: finish its guard, make a new one
            _finish_guard(entry[1])
        aiohttp = self.aiohttp
        connector = aiohttp.TCPConnector(
            limit=self.policy.max_connections,
            keepalive_timeout=CLIENT_KEEP_ALIVE_SECONDS,
        )
        session = aiohttp.ClientSession(connector=connector)
        guard = _guard(self._pools.sessions, loop, session)
        self._pools.sessions[loop] = (session, guard)
        await guard.asend(None)  # parked at its yield: the loop now tracks it
        return session

    def _client(self) -> Any:
        if self._pools.sync_client is None:
            httpx = self.httpx
            self._pools.sync_client = httpx.Client(
                base_url=self.base_url,
                limits=httpx.Limits(keepalive_expiry=CLIENT_KEEP_ALIVE_SECONDS),
            )
        return self._pools.sync_client

    def close(self) -> None:
        """Close the blocking client and every event loop's connections."""
        _close_pools(self._pools)

    async def aclose(self) -> None:
        """Close this loop's async session."""
        entry = self._pools.sessions.pop(asyncio.get_running_loop(), None)
        if entry is not None:
            await entry[1].aclose()  # the guard closes the session

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
        start = time.monotonic()
        content = encode(body) if body is not None else None
        url = self.base_url + path
        seconds = self.policy.request_timeout or timeout
        limits = aiohttp.ClientTimeout(
            total=seconds, connect=min(self.policy.connect_timeout, seconds)
        )
        attempt = 0
        while True:
            attempt += 1
            session = await self._session()
            try:
                async with session.request(
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
                wait = self._next(method, path, attempt, failed, start)
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                failed = self._aiohttp_failure(exc, retry)
                wait = self._next(method, path, attempt, failed, start)
            await asyncio.sleep(wait)

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
        start = time.monotonic()
        content = encode(body) if body is not None else None
        seconds = self.policy.request_timeout or timeout
        attempt = 0
        while True:
            attempt += 1
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
                wait = self._next(method, path, attempt, failed, start)
            except self.httpx.HTTPError as exc:
                failed = self._httpx_failure(exc, retry)
                wait = self._next(method, path, attempt, failed, start)
            time.sleep(wait)

    # ------------------------------------------------------------------ policy
    def _next(self, method: str, path: str, attempt: int, failed: _Attempt, start: float) -> float:
        """The wait before the next attempt; raises when there is none."""
        if isinstance(failed, _Refused):
            raise failed.error
        if not failed.retryable:
            raise self._gave_up(method, path, failed.reason, attempt)
        policy = self.policy
        wait = policy.delay(attempt, failed.retry_after)
        elapsed = time.monotonic() - start
        if policy.max_attempts is not None and attempt >= policy.max_attempts:
            raise self._gave_up(method, path, failed.reason, attempt)
        if elapsed + wait > policy.retry_window:
            raise self._gave_up(
                method,
                path,
                failed.reason,
                attempt,
                f" over {elapsed:.1f} s, its retry window of {policy.retry_window:g} s "
                f"(RetryPolicy(retry_window=...), env_config {RETRY_WINDOW_KEY})",
            )
        logger.info(
            "retrying %s %s in %.2f s (attempt %d failed: %s)",
            method,
            redact_text(self.base_url + path),
            wait,
            attempt,
            failed.reason,
        )
        return wait

    def _gave_up(
        self, method: str, path: str, reason: str, attempts: int, window: str = ""
    ) -> RemoteCallError:
        tries = f" after {attempts} attempt{'s' if attempts != 1 else ''}{window}"
        return RemoteCallError(
            f"{method} {redact_text(self.base_url + path)} failed{tries}: {reason}"
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
                        f"{method} {redact_text(self.base_url + path)} answered {status} with a "
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
                f"{method} {redact_text(self.base_url + path)} was refused: {reason}",
                status=status,
                code=code,
                detail=detail,
            )
        )


async def _guard(
    sessions: dict[Any, tuple[Any, Any]], loop: Any, session: Any
) -> AsyncIterator[None]:
    """Parked on ``session``'s loop for the session's life; closing it (the loop ending
    under ``asyncio.run``, :meth:`Transport.aclose`, :func:`_close_pools`) closes the
    session on that loop, which is the only place it can close cleanly."""
    try:
        yield
    finally:
        if sessions.get(loop, (None,))[0] is session:
            del sessions[loop]
        if not session.closed:
            await session.close()


def _close_pools(pools: _Pools) -> None:
    """Close a transport's connections from plain code, whatever state their loops are in."""
    client, pools.sync_client = pools.sync_client, None
    if client is not None:
        with contextlib.suppress(Exception):
            client.close()
    for loop in list(pools.sessions):
        entry = pools.sessions.pop(loop, None)
        if entry is not None:
            _close_on_loop(loop, *entry)


def _close_on_loop(loop: Any, session: Any, guard: Any) -> None:
    """Close one aiohttp session, on its own loop when that loop can still run.

    ``ClientSession.close()`` is a coroutine of the session's loop, which may be
    running in another thread (the runner's background loop: wait for it there),
    stopped (run it to completion), closed, or the loop of this very thread (neither
    can wait): then the session is detached and its connections closed directly.
    """
    try:
        if loop.is_running() and asyncio._get_running_loop() is not loop:
            closing = asyncio.run_coroutine_threadsafe(_aclose(guard), loop)
            closing.result(CLOSE_TIMEOUT_SECONDS)
            return
        if not loop.is_running() and not loop.is_closed() and not _loop_running_here():
            loop.run_until_complete(_aclose(guard))
            return
    except Exception:  # closing must never mask what the caller is doing
        logger.debug("closing an HTTP connection pool on its loop failed", exc_info=True)
    connector = session.connector
    session.detach()
    if connector is not None:
        try:
            connector._close()
        except Exception:  # a closed loop cannot close its transports: nothing more to do
            logger.debug("closing an HTTP connection pool failed", exc_info=True)
    _finish_guard(guard)


async def _aclose(guard: Any) -> None:
    await guard.aclose()


def _loop_running_here() -> bool:
    return asyncio._get_running_loop() is not None


def _finish_guard(guard: Any) -> None:
    """Close a guard whose session is already closed, without a loop (it awaits nothing
    then); a guard left unfinished would be closed by its loop's finalizer hook, which
    fails on a closed loop."""
    closing = guard.aclose()
    try:
        closing.send(None)
    except StopIteration:
        return
    except Exception:  # a guard that cannot finish is left to the collector
        logger.debug("finishing a connection pool guard failed", exc_info=True)
        return
    closing.close()


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
