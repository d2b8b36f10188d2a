"""Requests to Atropos's API server, retried through its outages.

The API server going away for a while (a restart, a network blip) does not end the
producer: a request that gets no connection, times out or answers HTTP 5xx (or 408,
429) is retried by the core's retry policy (:mod:`agentsgym.retry`), with exponential
backoff and jitter, for up to ``outage_window`` seconds. An outage longer than that
raises :class:`AtroposOutageError`. Other 4xx answers are not retried (resending what
the server refused changes nothing). A push is resent only when no answer came back,
so it reaches the server once, unless the server stored it and the answer itself was
lost: Atropos has no idempotency key to tell such a resend apart.

Everything logged or raised passes through :func:`agentsgym.output.redact_text`: a
key in the API URL's userinfo stays out of logs.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

from agentsgym.errors import AgentsGymError
from agentsgym.runtime import Attempts, RetryPolicy, redact_text, retry_async

logger = logging.getLogger("agentsgym_atropos.producer")

DEFAULT_OUTAGE_WINDOW = 300.0
"""Seconds a request is retried while the API server is unreachable or failing."""
RETRY_INITIAL = 0.5
RETRY_MAX = 10.0
"""The backoff between retries: from ``RETRY_INITIAL`` seconds, doubling, at most
``RETRY_MAX`` (before jitter); small enough that the producer is back at work within
seconds of the server, however long the outage was."""
RETRIED_STATUSES = frozenset({408, 429})
"""HTTP answers below 500 that still mean "try again later"."""


class AtroposError(AgentsGymError):
    """The Atropos API server could not be reached, or refused what was sent."""


class AtroposOutageError(AtroposError):
    """The API server stayed unreachable (or failing) for longer than the outage window."""


class TransientError(AtroposError):
    """One attempt failed in a way worth retrying (no connection, a timeout, HTTP 5xx)."""

    def __init__(self, message: str, *, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


def outage_policy(window: float) -> RetryPolicy:
    """The producer's retry policy: backoff from 0.5 s to 10 s for ``window`` seconds."""
    return RetryPolicy(retry_window=window, backoff=RETRY_INITIAL, max_backoff=RETRY_MAX)


class AtroposAPI:
    """One aiohttp session to the API server, for the producer's run (see the module
    docstring).

    :param on_retry: told of every retry (the producer counts them).
    :param clock, sleep, rng: the retry loop's clock, wait and jitter (tests pass fakes).
    """

    def __init__(
        self,
        api_url: str,
        *,
        request_timeout: float,
        outage_window: float,
        on_retry: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.shown_url = redact_text(self.api_url)
        self.request_timeout = request_timeout
        self.outage_window = outage_window
        self._on_retry = on_retry
        self._clock = clock
        self._sleep = sleep
        self._rng = rng
        self._session: Any = None

    async def open(self) -> None:
        import aiohttp

        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self.request_timeout)
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def attempt(self, method: str, path: str, payload: Any = None) -> Any:
        """One try of a request; :class:`TransientError` for what is worth retrying."""
        import aiohttp

        where = f"{method} {self.shown_url}{path}"
        try:
            async with self._session.request(method, self.api_url + path, json=payload) as response:
                text = await response.text()
                answered = f"{where} answered HTTP {response.status}: {redact_text(text[:300])}"
                if response.status >= 500 or response.status in RETRIED_STATUSES:
                    raise TransientError(answered, status=response.status)
                if response.status >= 400:
                    raise AtroposError(answered)
                return await response.json(content_type=None)
        except aiohttp.ClientConnectionError as exc:
            raise TransientError(
                f"cannot reach the Atropos API server at {self.shown_url} "
                f"({type(exc).__name__}: {redact_text(str(exc))}); start it with "
                "`run-api --port N` and pass --api-url"
            ) from exc
        except asyncio.TimeoutError as exc:
            raise TransientError(
                f"{where} did not answer within {self.request_timeout:g}s"
            ) from exc
        except aiohttp.ClientError as exc:
            raise AtroposError(
                f"{where} failed ({type(exc).__name__}: {redact_text(str(exc))})"
            ) from exc
        except ValueError as exc:  # an answer that is not JSON
            raise AtroposError(f"{where} answered something that is not JSON: {exc}") from exc

    async def request(
        self,
        method: str,
        path: str,
        payload: Any = None,
        *,
        window: float | None = None,
        attempt: Callable[[], Awaitable[Any]] | None = None,
    ) -> Any:
        """A request, retried while it fails transiently for up to ``window`` seconds
        (default: the outage window); ``attempt``: one try of it, if not the plain one."""
        window = self.outage_window if window is None else window
        return await retry_async(
            attempt or (lambda: self.attempt(method, path, payload)),
            outage_policy(window),
            retryable=lambda exc: isinstance(exc, TransientError),
            give_up=lambda exc, how: _outage(exc, how, window),
            on_retry=lambda exc, attempts, wait: self._retrying(exc, attempts, wait, window),
            clock=self._clock,
            sleep=self._sleep,
            rng=self._rng,
        )

    def _retrying(self, exc: Exception, attempts: int, wait: float, window: float) -> None:
        self._on_retry()
        logger.warning(
            "%s; retry %d in %.1fs (giving up %.0fs after the first attempt)",
            exc,
            attempts,
            wait,
            window,
        )


def _outage(exc: Exception, how: Attempts, window: float) -> BaseException:
    if how.exhausted is None:
        return exc  # not transient: the server's refusal, raised as it is
    return AtroposOutageError(
        f"{exc}; still failing after {how.attempts} attempt(s) over {how.elapsed:.0f}s, "
        f"beyond the outage window of {window:g}s (outage_window, --outage-window)"
    )
