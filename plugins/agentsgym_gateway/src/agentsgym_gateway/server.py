"""uvicorn in a daemon thread, on a socket bound before it starts (``port=0`` works)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

START_TIMEOUT_SECONDS = 60.0


class BackgroundServer:
    """Serves an ASGI app from a daemon thread; ``url`` is known once started."""

    def __init__(self, app: Any, host: str, port: int) -> None:
        self.app = app
        self.host = host
        self.port = port
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> BackgroundServer:
        import uvicorn

        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self._socket = sock
        self.port = sock.getsockname()[1]
        # No access log: a path-prefix session key is part of the URL.
        config = uvicorn.Config(
            self.app,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_keep_alive=30,
            backlog=4096,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [sock]},
            daemon=True,
            name="agentsgym-gateway",
        )
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the gateway did not start on {self.url}")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            if self._thread is not None:
                self._thread.join(timeout=15)
            self._server = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None
