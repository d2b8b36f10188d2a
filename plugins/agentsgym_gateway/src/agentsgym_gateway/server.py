"""The gateway's listening server: agentsgym-serve's background server, with the
gateway's settings (one implementation of a loopback uvicorn server in a thread; it
needs uvicorn alone, not agentsgym-serve's FastAPI, which is that distribution's extra
``[server]``)."""

from __future__ import annotations

from typing import Any

from agentsgym_serve.server import BackgroundServer as ServeBackgroundServer

KEEP_ALIVE_SECONDS = 30
"""Longer than an OpenAI client's own keep-alive, so the program, not the gateway,
closes idle connections and a call never races the gateway's close."""
BACKLOG = 4096
"""A thousand programs may connect at once (the benchmark's 1,000 sessions)."""


class BackgroundServer(ServeBackgroundServer):
    """Serves the gateway's app from a daemon thread on ``host:port`` (``port=0``: a
    free one); ``start`` raises :class:`OSError` naming the address when the port is
    taken, with the socket closed."""

    def __init__(self, app: Any, host: str, port: int) -> None:
        super().__init__(
            app,
            host,
            port,
            keep_alive_seconds=KEEP_ALIVE_SECONDS,
            backlog=BACKLOG,
            name="agentsgym-gateway",
        )
