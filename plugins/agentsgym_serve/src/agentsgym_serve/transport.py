"""HTTP calls to an env server, retried where that is safe, and always bounded.

Which failures may be retried is :mod:`agentsgym_serve.retry_policy`'s; how often and
for how long is the core's one retry policy (:mod:`agentsgym.retry`): a call that may
be retried is retried, with exponential backoff and jitter, for as long as its
``retry_window`` lasts (60 s by default: long enough for a server or gateway to
restart), each attempt within its own timeout. It ends in a reply or a
:class:`~agentsgym_serve.call_failures.RemoteCallError` saying what failed and for
how long it was tried, never in a hang.

Episode calls go through aiohttp, one session (one connection pool) per event loop
(:class:`agentsgym.loop_pools.PerLoop`): httpx's async client spent about 1.5 ms of
CPU per request against aiohttp's 0.4 ms (bench/bench_serve.py), and a remote env
makes one request per turn. The few calls of an env's constructor use httpx's
blocking client: a constructor may run inside a running event loop (the runner
builds envs there), where it can neither await nor wait for another loop. Both send
one attempt and leave the rest (replies, failures, retries) to the same code.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import weakref
from typing import Any

import aiohttp
import httpx

from agentsgym.runtime import Attempts, PerLoop, redact_text, retry_async, retry_sync
from agentsgym_serve.call_failures import (
    AttemptFailed,
    Refused,
    RemoteCallError,
    is_retryable,
    reply_of,
    transport_failure,
)
from agentsgym_serve.retry_policy import RETRY_WINDOW_KEY, Retry, RetryPolicy

logger = logging.getLogger("agentsgym_serve.client")

CLIENT_KEEP_ALIVE_SECONDS = 4.0
"""Idle connections are dropped by the client after this long: before the server's own
keep-alive ends (uvicorn's default is 5 s, agentsgym serve's 30 s), so a request never
goes out on a connection the server is closing, which would look like a dropped
reply and, for a call that cannot be repeated, fail its episode."""

_HEADERS = {"content-type": "application/json"}


def encode(body: Any) -> bytes:
    """ASCII JSON: a lone surrogate in an action travels as its escape, unchanged."""
    return json.dumps(body, ensure_ascii=True, separators=(",", ":")).encode("ascii")


class Transport:
    """Calls one env server (see the module docstring); sync and async, one connection
    pool per event loop (a pool belongs to the loop that made it)."""

    def __init__(self, base_url: str, policy: RetryPolicy | None = None) -> None:
        self.base_url = base_url
        self.policy = policy or RetryPolicy()
        self._sessions: PerLoop[aiohttp.ClientSession] = PerLoop(
            self._new_session,
            lambda session: session.close(),
            abandon=_abandon_session,
            is_closed=lambda session: session.closed,
        )
        self._sync = _SyncClient(base_url)
        # An env dropped without close() (or alive at exit) still closes its pools.
        weakref.finalize(self, _close_all, self._sessions, self._sync)

    def _new_session(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            limit=self.policy.max_connections, keepalive_timeout=CLIENT_KEEP_ALIVE_SECONDS
        )
        return aiohttp.ClientSession(connector=connector)

    def close(self) -> None:
        """Close the blocking client and every event loop's connections."""
        _close_all(self._sessions, self._sync)

    async def aclose(self) -> None:
        """Close this loop's async session."""
        await self._sessions.aclose()

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
        content = encode(body) if body is not None else None
        seconds = self.policy.seconds(timeout)
        limits = aiohttp.ClientTimeout(
            total=seconds, connect=min(self.policy.connect_timeout, seconds)
        )
        where = self._where(method, path)

        async def attempt() -> Any:
            session = self._sessions.get()
            try:
                async with session.request(
                    method,
                    self.base_url + path,
                    data=content,
                    params=params,
                    headers=_HEADERS if content is not None else None,
                    timeout=limits,
                ) as response:
                    payload = await response.read()
                    status, headers = response.status, response.headers
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                raise _aiohttp_failure(exc, retry) from None
            return reply_of(where, status, payload, headers, retry)

        return await retry_async(attempt, self.policy, **self._retrying(where))

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
        content = encode(body) if body is not None else None
        seconds = self.policy.seconds(timeout)
        limits = httpx.Timeout(seconds, connect=min(self.policy.connect_timeout, seconds))
        where = self._where(method, path)

        def attempt() -> Any:
            try:
                response = self._sync.get().request(
                    method,
                    path,
                    content=content,
                    params=params,
                    headers=_HEADERS if content is not None else None,
                    timeout=limits,
                )
            except httpx.HTTPError as exc:
                raise _httpx_failure(exc, retry) from None
            return reply_of(where, response.status_code, response.content, response.headers, retry)

        return retry_sync(attempt, self.policy, **self._retrying(where))

    # ------------------------------------------------------------------ policy
    def _where(self, method: str, path: str) -> str:
        return f"{method} {redact_text(self.base_url + path)}"

    def _retrying(self, where: str) -> dict[str, Any]:
        return {
            "retryable": is_retryable,
            "give_up": functools.partial(self._gave_up, where),
            "on_retry": functools.partial(_log_retry, where),
        }

    def _gave_up(self, where: str, failed: Exception, how: Attempts) -> BaseException:
        if isinstance(failed, Refused):
            return failed.error
        if not isinstance(failed, AttemptFailed):
            return failed  # not the transport's: a bug, raised as it is
        window = ""
        if how.exhausted == "window":
            window = (
                f" over {how.elapsed:.1f} s, its retry window of {self.policy.retry_window:g} s "
                f"(RetryPolicy(retry_window=...), env_config {RETRY_WINDOW_KEY})"
            )
        tries = f"{how.attempts} attempt{'s' if how.attempts != 1 else ''}"
        return RemoteCallError(f"{where} failed after {tries}{window}: {failed.reason}")


def _log_retry(where: str, failed: Exception, attempts: int, wait: float) -> None:
    logger.info("retrying %s in %.2f s (attempt %d failed: %s)", where, wait, attempts, failed)


def _httpx_failure(exc: Exception, retry: Retry) -> AttemptFailed:
    unsent = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout))
    return transport_failure(
        exc, retry, unsent=unsent, transport=isinstance(exc, httpx.TransportError)
    )


def _aiohttp_failure(exc: Exception, retry: Retry) -> AttemptFailed:
    unsent = isinstance(exc, (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError))
    transport = isinstance(
        exc, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, asyncio.TimeoutError)
    )
    return transport_failure(exc, retry, unsent=unsent, transport=transport)


def _abandon_session(session: aiohttp.ClientSession) -> None:
    """Close a session whose loop cannot run any more: its connections directly."""
    connector = session.connector
    session.detach()
    if connector is not None:
        connector._close()


class _SyncClient:
    """httpx's blocking client, made on first use (apart from the transport, so that
    its finalizer can close it)."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.client: httpx.Client | None = None

    def get(self) -> httpx.Client:
        if self.client is None:
            self.client = httpx.Client(
                base_url=self.base_url,
                limits=httpx.Limits(keepalive_expiry=CLIENT_KEEP_ALIVE_SECONDS),
            )
        return self.client

    def close(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # closing must never mask what the caller is doing
                logger.debug("closing the blocking HTTP client failed", exc_info=True)


def _close_all(sessions: PerLoop[Any], sync: _SyncClient) -> None:
    sync.close()
    sessions.close()
