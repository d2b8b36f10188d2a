"""agentsgym-serve: envs over HTTP, the env server and the remote envs that play on one.

* **Server**: :func:`create_app` (FastAPI: ``agentsgym-serve[server]``) serves one env
  over AgentGym's protocol and agentsgym's own ``/agentsgym/v1`` endpoints;
  ``agentsgym serve ENV_ID`` runs it; :class:`BackgroundServer` runs any ASGI app in a
  thread (tests, notebooks, agentsgym-gateway's model gateway) with uvicorn alone.
* **Clients**: :class:`RemoteEnv` plays an env on an ``agentsgym serve`` server,
  :class:`AgentGymEnv` one on a server of AgentGym's protocol, and :func:`connect`
  picks between them. The plugin registers ``http://``, ``https://`` and
  ``agentgym+http(s)://`` as env sources, so ``agentsgym.make("http://host:port")``
  and dataset rows that name a server play through :func:`connect`.
* **OpenEnv**: with ``agentsgym-serve[openenv]``, the server also speaks OpenEnv's
  protocol (``/ws`` sessions, ...), and :class:`OpenEnvEnv` plays any OpenEnv server
  (``agentsgym.make("openenv+ws://host:port")``).
* **Tests and demos**: :class:`~agentsgym_serve.model_server.OpenAICompatServer`, an
  OpenAI-compatible model server on loopback (Starlette: no FastAPI needed).

See docs/serving.md. Nothing here is imported until used.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = [
    "AgentGymConfig",
    "AgentGymEnv",
    "BackgroundServer",
    "OpenAICompatServer",
    "OpenEnvConfig",
    "OpenEnvEnv",
    "RemoteEnv",
    "RemoteEnvError",
    "RetryPolicy",
    "ScriptedPolicy",
    "SessionTable",
    "connect",
    "create_app",
]

_LAZY = {
    "OpenAICompatServer": "agentsgym_serve.model_server",
    "ScriptedPolicy": "agentsgym_serve.model_server",
    "AgentGymConfig": "agentsgym_serve.agentgym_env",
    "AgentGymEnv": "agentsgym_serve.agentgym_env",
    "BackgroundServer": "agentsgym_serve.server",
    "OpenEnvConfig": "agentsgym_serve.openenv_mapping",
    "OpenEnvEnv": "agentsgym_serve.openenv_env",
    "RemoteEnv": "agentsgym_serve.remote_env",
    "RemoteEnvError": "agentsgym_serve.errors",
    "RetryPolicy": "agentsgym_serve.retry_policy",
    "SessionTable": "agentsgym_serve.sessions",
    "connect": "agentsgym_serve.client",
    "create_app": "agentsgym_serve.app",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentsgym_serve' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from agentsgym_serve.agentgym_env import AgentGymConfig, AgentGymEnv
    from agentsgym_serve.app import create_app
    from agentsgym_serve.client import connect
    from agentsgym_serve.errors import RemoteEnvError
    from agentsgym_serve.model_server import OpenAICompatServer, ScriptedPolicy
    from agentsgym_serve.openenv_env import OpenEnvEnv
    from agentsgym_serve.openenv_mapping import OpenEnvConfig
    from agentsgym_serve.remote_env import RemoteEnv
    from agentsgym_serve.retry_policy import RetryPolicy
    from agentsgym_serve.server import BackgroundServer
    from agentsgym_serve.sessions import SessionTable
