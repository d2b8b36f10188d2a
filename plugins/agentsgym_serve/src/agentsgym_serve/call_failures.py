"""What an env server's reply, or a failed attempt to get one, means for the call: a
result, a failure that may be retried, or a refusal (see
:mod:`agentsgym_serve.retry_policy` for which is which)."""

from __future__ import annotations

import json
from typing import Any

from agentsgym_serve.errors import RemoteEnvError
from agentsgym_serve.retry_policy import Retry

NOT_RETRIED = " (not retried: the server may have applied it)"


class RemoteCallError(RemoteEnvError):
    """A call to an env server that failed: the server's status and error code when it
    answered (``status`` 0 when it did not)."""

    def __init__(
        self, message: str, *, status: int = 0, code: str | None = None, detail: str = ""
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.detail = detail or message


class AttemptFailed(Exception):
    """One failed attempt, and whether another may follow."""

    def __init__(self, reason: str, *, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.retry_after = retry_after


class Refused(AttemptFailed):
    """The server answered and said no: raised to the caller as it is."""

    def __init__(self, error: RemoteCallError) -> None:
        super().__init__(str(error), retryable=False)
        self.error = error


def is_retryable(exc: Exception) -> bool:
    """The core runner's question, answered by the attempt's own verdict."""
    return isinstance(exc, AttemptFailed) and exc.retryable


def transport_failure(
    exc: Exception, retry: Retry, *, unsent: bool, transport: bool
) -> AttemptFailed:
    """What a client library's exception means for a retry."""
    reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if unsent:
        return AttemptFailed(reason, retryable=True)
    if transport:  # dropped, reset, timed out after sending: maybe applied
        if retry is Retry.UNSENT:
            reason += NOT_RETRIED
        return AttemptFailed(reason, retryable=retry is Retry.IDEMPOTENT)
    return AttemptFailed(reason, retryable=False)


def reply_of(where: str, status: int, content: bytes, headers: Any, retry: Retry) -> Any:
    """The parsed JSON of a 2xx reply to ``where`` (``METHOD url``); raises
    :class:`AttemptFailed` (or :class:`Refused`) for anything else."""
    if status < 300:
        try:
            return json.loads(content)
        except ValueError:
            raise Refused(
                RemoteCallError(
                    f"{where} answered {status} with a body that is not JSON: {content[:200]!r}",
                    status=status,
                )
            ) from None
    code, detail = error_of(content)
    reason = f"HTTP {status}" + (f" {code}" if code else "") + (f": {detail}" if detail else "")
    if status == 503:
        raise AttemptFailed(reason, retryable=True, retry_after=retry_after_of(headers))
    if status >= 500:
        if retry is Retry.UNSENT:
            reason += NOT_RETRIED
        raise AttemptFailed(reason, retryable=retry is Retry.IDEMPOTENT)
    raise Refused(
        RemoteCallError(f"{where} was refused: {reason}", status=status, code=code, detail=detail)
    )


def error_of(content: bytes) -> tuple[str | None, str]:
    """The error code and detail of an error reply (agentsgym's ``{error, detail}``)."""
    try:
        body = json.loads(content)
    except ValueError:
        return None, content[:500].decode("utf-8", "replace")
    if isinstance(body, dict):
        code = body.get("error") if isinstance(body.get("error"), str) else None
        detail = body.get("detail")
        if detail is None and code is None:
            return None, json.dumps(body)[:500]
        text = detail if isinstance(detail, str) else json.dumps(detail)[:1000]
        return code, text
    return None, json.dumps(body)[:500]


def retry_after_of(headers: Any) -> float | None:
    try:
        return float(headers.get("retry-after", ""))
    except (TypeError, ValueError):
        return None
