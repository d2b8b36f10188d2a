"""Structured logs of the env server: one JSON object per line.

Library code logs events with their fields in ``extra={"fields": {...}}``
(``session_created``, ``session_closed`` with the reason, ``env_built``, ...) on the
``agentsgym_serve`` logger, and one ``request`` record per HTTP request (method,
path, status, milliseconds) on ``agentsgym_serve.access``. ``agentsgym serve``
writes them as JSON lines on stderr (:func:`configure_json_logging`); in a program
of your own they are ordinary log records.

Secrets never reach the log lines: :class:`JsonFormatter` redacts the message, the
fields (values of secret-looking keys, URL userinfo, ``key=value`` secrets in text;
see :mod:`agentsgym.redaction`) and the exception text of every record, uvicorn's
included.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import IO, Any

from agentsgym.runtime import redact, redact_text

access_logger = logging.getLogger("agentsgym_serve.access")


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message", **fields}`` on one line, secrets redacted."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redact_text(record.getMessage()),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            data.update(redact(fields))
        if record.exc_info:
            data["exception"] = redact_text(self.formatException(record.exc_info))
        return json.dumps(data, ensure_ascii=True, default=str)


def configure_json_logging(
    level: int = logging.INFO, *, access_log: bool = True, stream: IO[str] | None = None
) -> None:
    """JSON lines on ``stream`` (stderr) for the server's and uvicorn's loggers."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    for name in ("agentsgym", "agentsgym_serve", "uvicorn", "uvicorn.error"):
        target = logging.getLogger(name)
        target.handlers = [handler]
        target.setLevel(level)
        target.propagate = False
    access_logger.setLevel(level if access_log else logging.WARNING)


class AccessLogMiddleware:
    """A pure ASGI middleware: one ``request`` record per HTTP request."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not access_logger.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_and_note(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            client = scope.get("client")
            access_logger.info(
                "request",
                extra={
                    "fields": {
                        "event": "request",
                        "method": scope.get("method"),
                        "path": scope.get("path"),
                        "status": status,
                        "ms": round((time.perf_counter() - start) * 1000, 3),
                        "client": f"{client[0]}:{client[1]}" if client else None,
                    }
                },
            )
