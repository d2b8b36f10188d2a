"""What the env server answers when it will not or cannot do what was asked.

Each error has an HTTP status and a stable ``error`` code (clients branch on the
code, people read ``detail``). A 5xx is only ever "try again later" (503) or a bug:
anything an env hook raises is the env's answer to that request (400
``env_error``), not a server failure, so a client never retries it.
"""

from __future__ import annotations

from typing import Any

from agentsgym.errors import AgentsGymError


class RemoteEnvError(AgentsGymError):
    """An env server could not be reached, refused a request, or broke its protocol
    (docs/serving.md); inside an episode it is recorded as the episode's error."""


class ServeError(Exception):
    """An error reply: ``status``, ``code``, ``detail`` and optional extra fields."""

    status = 400
    code = "bad_request"

    def __init__(self, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra = extra
        self.headers: dict[str, str] = {}

    def body(self) -> dict[str, Any]:
        return {"error": self.code, "detail": self.detail, **self.extra}


class UnknownSession(ServeError):
    status = 404
    code = "unknown_session"


class WrongProtocol(ServeError):
    status = 403
    code = "wrong_protocol"


class SessionClosed(ServeError):
    status = 410
    code = "session_closed"


class OutOfOrder(ServeError):
    """A step or reset that is neither the next one nor a retry of the last one."""

    status = 409
    code = "out_of_order"


class EpisodeState(ServeError):
    """A call the episode's state does not allow (step before reset, after the end)."""

    status = 409
    code = "episode_state"


class SessionFailed(ServeError):
    status = 409
    code = "session_failed"


class EnvFailure(ServeError):
    """An env hook raised (or overran its budget) on this request."""

    status = 400
    code = "env_error"


class BadRole(ServeError):
    """A session names a role its env does not have, one the server's agents must play,
    or a role at all in an env without roles."""

    status = 400
    code = "bad_role"


class BadEnvConfig(ServeError):
    status = 422
    code = "bad_env_config"


class ConfigLocked(ServeError):
    status = 403
    code = "config_locked"


class NoTask(ServeError):
    status = 404
    code = "no_such_task"


class IdsExhausted(ServeError):
    """The server handed out every session id of its range (2**40 of them)."""

    status = 503
    code = "ids_exhausted"


class BodyTooLarge(ServeError):
    """A request body over the server's ``max_body_bytes``."""

    status = 413
    code = "body_too_large"


class ServerFull(ServeError):
    status = 503
    code = "server_full"

    def __init__(self, detail: str, retry_after: int = 1, **extra: Any) -> None:
        super().__init__(detail, **extra)
        self.headers = {"Retry-After": str(retry_after)}
