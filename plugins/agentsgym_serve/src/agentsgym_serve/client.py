"""connect(url): the env on a server, of whichever protocol the server speaks.

``agentgym+http://...`` is AgentGym's protocol by name. For ``http://...`` the server
is asked ``GET /agentsgym/v1/env``: an agentsgym server answers with what it serves
(-> :class:`~agentsgym_serve.remote_env.RemoteEnv`); a server that does not know
the path (404 or 405) is taken for an AgentGym server (->
:class:`~agentsgym_serve.agentgym_env.AgentGymEnv`). ``agentsgym.make(url)`` calls
this.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentsgym import MultistepEnv
from agentsgym_serve.call_failures import RemoteCallError
from agentsgym_serve.retry_policy import RETRY_WINDOW_KEY, Retry, RetryPolicy, client_policy
from agentsgym_serve.schemas import PROTOCOL, V1_PREFIX
from agentsgym_serve.transport import Transport
from agentsgym_serve.urls import Protocol, split_protocol

DETECT_TIMEOUT_SECONDS = 30.0


def connect(
    url: str,
    tokenizer: Any = None,
    env_config: dict[str, Any] | None = None,
    *,
    plugins: Iterable[object] = (),
    protocol: Protocol = "auto",
    retry: RetryPolicy | None = None,
) -> MultistepEnv:
    """The env served at ``url`` (see the module docstring).

    :param protocol: ``"agentsgym"``, ``"agentgym"``, or ``"auto"`` to follow the
        URL's scheme and then ask the server.
    """
    named, base = split_protocol(url)
    if protocol == "auto":
        protocol = named
    info = None
    if protocol == "auto":
        # the env_config's retry window holds for this first call too
        window = (env_config or {}).get(RETRY_WINDOW_KEY)
        protocol, info = detect(base, client_policy(retry, window))
    if protocol == "agentgym":
        from agentsgym_serve.agentgym_env import AgentGymEnv

        return AgentGymEnv(base, tokenizer, env_config, plugins=plugins, retry=retry)
    from agentsgym_serve.remote_env import RemoteEnv

    return RemoteEnv(base, tokenizer, env_config, plugins=plugins, retry=retry, info=info)


def detect(
    base_url: str, retry: RetryPolicy | None = None
) -> tuple[Protocol, dict[str, Any] | None]:
    """Which protocol the server at ``base_url`` speaks, and its env info if agentsgym's."""
    transport = Transport(base_url, retry)
    try:
        info = transport.call_sync(
            "GET", f"{V1_PREFIX}/env", retry=Retry.IDEMPOTENT, timeout=DETECT_TIMEOUT_SECONDS
        )
    except RemoteCallError as exc:
        if exc.status in (404, 405):
            return "agentgym", None
        raise
    finally:
        transport.close()
    if isinstance(info, dict) and info.get("protocol") == PROTOCOL:
        return "agentsgym", info
    return "agentgym", None
