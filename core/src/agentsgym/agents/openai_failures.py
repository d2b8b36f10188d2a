"""What a failed request to an OpenAI-compatible server means: retried or not, and
the error that says what to check."""

from __future__ import annotations

from agentsgym.agents.openai_http import ServerStatusError, ServerTimeout, ServerUnreachable
from agentsgym.errors import AgentError

RETRY_STATUS = frozenset({408, 409, 429})
"""HTTP answers below 500 that still mean "try again later"."""


def is_transient(exc: Exception) -> bool:
    """A failure worth sending the same request again: no connection, a timeout, a
    5xx or one of :data:`RETRY_STATUS`."""
    if isinstance(exc, ServerStatusError):
        return exc.status in RETRY_STATUS or exc.status >= 500
    return isinstance(exc, (ServerUnreachable, ServerTimeout))


def refuses_token_fields(exc: Exception) -> bool:
    """A 400/422 that may be the server refusing vLLM's token-id fields (an
    OpenAI-strict server does), not a model it does not know."""
    return (
        isinstance(exc, ServerStatusError) and exc.status in (400, 422) and not mentions_model(exc)
    )


def mentions_model(exc: ServerStatusError) -> bool:
    text = exc.message.lower()
    return "model" in text and any(
        w in text for w in ("not exist", "not found", "unknown", "does not")
    )


def gave_up(base_url: str, timeout: float, api: str, exc: Exception, attempts: int) -> AgentError:
    """The error of a request that kept failing transiently."""
    tries = f"{attempts} attempt{'s' if attempts > 1 else ''}"
    if isinstance(exc, ServerTimeout):
        return AgentError(
            f"the server at {base_url} did not answer within {timeout:g}s "
            f"({tries}). Raise timeout=..., lower max_tokens or max_concurrency, or check "
            "that the server is not overloaded."
        )
    if isinstance(exc, ServerUnreachable):
        return AgentError(
            f"cannot reach an OpenAI-compatible server at {base_url} ({tries}: "
            f"{exc}). Check that the server is running and listening there (e.g. "
            "`vllm serve MODEL --port 8000` serves http://localhost:8000/v1), that base_url "
            "includes the /v1 prefix, and that no proxy or firewall blocks it."
        )
    status = exc.status if isinstance(exc, ServerStatusError) else "?"
    message = exc.message if isinstance(exc, ServerStatusError) else str(exc)
    return AgentError(
        f"the server at {base_url} kept failing with HTTP {status} "
        f"({tries}): {message}{token_prompt_hint(api)}"
    )


def refused(
    base_url: str, api: str, model: str | None, exc: ServerStatusError, models: list[str] | None
) -> AgentError:
    """The error of a request the server refused; ``models``: what it serves, if known."""
    status = exc.status
    if api == "generate" and status in (403, 404):
        return AgentError(
            f"{base_url} does not serve vLLM's token-in generate API (HTTP {status}): "
            f"{exc.message}. It needs vLLM 0.32 or later started with --enable-scale-out; "
            "or use api=completions (token-in too, without each token's weight version)."
        )
    if status in (401, 403):
        return AgentError(
            f"the server at {base_url} rejected the API key (HTTP {status}): "
            f"{exc.message}. Pass api_key=... or set OPENAI_API_KEY."
        )
    if models is not None and model not in models:
        return unknown_model(base_url, model, models)
    if status == 404:
        return AgentError(
            f"{base_url} answered HTTP 404 for the {api} API: "
            f"{exc.message}. Check that base_url ends with /v1 and that the server "
            f"implements /{'chat/' if api == 'chat' else ''}completions."
        )
    return AgentError(
        f"the server at {base_url} refused the request (HTTP {status}): {exc.message}"
        + token_prompt_hint(api)
    )


def token_prompt_hint(api: str) -> str:
    if api != "completions":
        return ""
    return (
        "; api=completions sends the prompt as token ids, which some servers "
        "(llama.cpp's) refuse: use api=chat there"
    )


def unknown_model(base_url: str, model: str | None, models: list[str]) -> AgentError:
    served = ", ".join(repr(m) for m in models) or "nothing"
    return AgentError(
        f"model {model!r} is not served by {base_url}; it serves {served}. "
        "Pass model=<one of them> (vLLM serves the name given to `vllm serve` or "
        "--served-model-name)."
    )
