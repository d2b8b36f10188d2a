"""How a remote env's calls are retried and bounded: the core's retry policy, with the
timeouts and the connection limit of an env server's connections.

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
is retried for any call, after the server's ``Retry-After``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum
from typing import Any

from agentsgym.errors import EnvConfigError
from agentsgym.runtime import RetryPolicy as CoreRetryPolicy

RETRY_WINDOW_KEY = "retry_window_seconds"
"""The env_config key of a remote env's retry window (taken by the client, not sent)."""


class Retry(Enum):
    """Which failures a call may be retried after (see the module docstring)."""

    IDEMPOTENT = "idempotent"  # any transport failure, 5xx
    UNSENT = "unsent"  # only failures before the request left (and 503)


@dataclass(frozen=True)
class RetryPolicy(CoreRetryPolicy):
    """How hard a remote env tries before a call fails (and its episode with it).

    The retry fields are :class:`agentsgym.runtime.RetryPolicy`'s (the window rides out a
    server or gateway restart by default); with them:

    :param connect_timeout: seconds to open a connection.
    :param request_timeout: seconds to wait for a reply, per attempt. ``None``: the
        env's ``hook_timeout_seconds`` (a step takes as long as the env's hooks).
    :param max_connections: connections to the server at most, per event loop.
    """

    connect_timeout: float = 5.0
    request_timeout: float | None = None
    max_connections: int = 1024

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.connect_timeout <= 0 or (
            self.request_timeout is not None and self.request_timeout <= 0
        ):
            raise ValueError(
                f"connect_timeout and request_timeout must be seconds > 0, got "
                f"{self.connect_timeout} and {self.request_timeout}"
            )
        if self.max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {self.max_connections}")

    def seconds(self, timeout: float) -> float:
        """The timeout of one attempt of a call whose own limit is ``timeout``."""
        return self.request_timeout or timeout


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
