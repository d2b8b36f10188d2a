"""Envs over HTTP: the env server and the remote envs that play on one.

* **Server**: :func:`create_app` (FastAPI) serves one env over AgentGym's protocol
  and agentsgym's own ``/agentsgym/v1`` endpoints; ``agentsgym serve ENV_ID`` runs
  it; :class:`BackgroundServer` runs it in a thread (tests, notebooks).
* **Clients**: :class:`RemoteEnv` plays an env on an ``agentsgym serve`` server,
  :class:`AgentGymEnv` one on a server of AgentGym's protocol, and :func:`connect`
  (what ``agentsgym.make("http://host:port")`` calls) picks between them.

See docs/serving.md. Nothing here is imported until used: the server needs the
``serve`` extra (fastapi, uvicorn), the clients only httpx.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = [
    "AgentGymConfig",
    "AgentGymEnv",
    "BackgroundServer",
    "RemoteEnv",
    "RetryPolicy",
    "SessionTable",
    "connect",
    "create_app",
]

_LAZY = {
    "AgentGymConfig": "agentsgym.serve.agentgym_env",
    "AgentGymEnv": "agentsgym.serve.agentgym_env",
    "BackgroundServer": "agentsgym.serve.server",
    "RemoteEnv": "agentsgym.serve.remote_env",
    "RetryPolicy": "agentsgym.serve.transport",
    "SessionTable": "agentsgym.serve.sessions",
    "connect": "agentsgym.serve.client",
    "create_app": "agentsgym.serve.app",
}
_NEEDS_SERVER = {"create_app", "BackgroundServer"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentsgym.serve' has no attribute {name!r}")
    if name in _NEEDS_SERVER:
        require_server_extra(f"agentsgym.serve.{name}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)


def require_server_extra(what: str) -> None:
    """Raise a MissingExtraError naming the extra when fastapi or uvicorn is missing."""
    from importlib.util import find_spec

    missing = [name for name in ("fastapi", "uvicorn") if find_spec(name) is None]
    if missing:
        from agentsgym.errors import MissingExtraError

        raise MissingExtraError(
            f"{what} needs {' and '.join(missing)}, from the serve extra: "
            "pip install 'agentsgym[serve]'"
        )


if TYPE_CHECKING:
    from agentsgym.serve.agentgym_env import AgentGymConfig, AgentGymEnv
    from agentsgym.serve.app import create_app
    from agentsgym.serve.client import connect
    from agentsgym.serve.remote_env import RemoteEnv
    from agentsgym.serve.server import BackgroundServer
    from agentsgym.serve.sessions import SessionTable
    from agentsgym.serve.transport import RetryPolicy
