"""An agent backed by an OpenAI-compatible server (vLLM, SGLang, OpenAI, ...).

Natively async, with one aiohttp session per event loop (:mod:`.openai_http` says why
not the ``openai`` SDK). Transient failures (connection, timeout, HTTP 408/409/429,
5xx) are retried with backoff and jitter; the final error says what to check.

By default it asks for vLLM's ``logprobs`` and ``return_token_ids`` (vLLM >= 0.10.2):
the sampled ids, logprobs and the server's prompt ids go into the trajectory verbatim.
A chat reply without prompt ids is text only (what the model conditioned on is
unknown); a server that rejects these fields (HTTP 400/422) is asked once more without
them, and from then on. ``api="completions"`` is token-in: the prompt is the episode's
exact ids, so the server conditions on exactly what the trajectory records (RL with
vLLM); without ids (a game master) it falls back to the chat API.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

from agentsgym.agents.openai_http import (
    JSONClient,
    ServerProtocolError,
    ServerStatusError,
    ServerTimeout,
    ServerUnreachable,
)
from agentsgym.aio import run_sync, running_background_loop
from agentsgym.errors import AgentError
from agentsgym.types import AgentAction, EpisodeContext, Message, Messages

if TYPE_CHECKING:
    from typing_extensions import Self

logger = logging.getLogger(__name__)

T = TypeVar("T")
Api = Literal["chat", "completions"]
RETRY_STATUS = {408, 409, 429}
DEFAULT_MAX_CONCURRENCY = 64
_Failure = ServerStatusError | ServerUnreachable | ServerTimeout  # what is retried


@dataclass
class _LoopResources:
    """What the agent holds per event loop: a client and the loop-bound primitives."""

    client: Any
    semaphore: asyncio.Semaphore
    model_lock: asyncio.Lock
    closer: Any = None


async def _closed_with_its_loop(per_loop: Any, loop: Any, client: Any) -> Any:
    """Parked on a loop that is not agentsgym's own: ``asyncio.run`` finalizes async
    generators before it closes its loop, and so closes the loop's client."""
    try:
        yield
    finally:
        per_loop.pop(loop, None)
        await client.close()


def _close_clients(per_loop: Any) -> None:
    try:
        current = asyncio.get_running_loop()
    except RuntimeError:
        current = None
    for loop, resources in list(per_loop.items()):
        per_loop.pop(loop, None)
        try:
            if loop is current:  # dropped on its own loop: closed there, soon
                loop.create_task(resources.client.close())
            elif loop is running_background_loop():
                run_sync(resources.client.close())
            elif not loop.is_closed() and not loop.is_running():
                loop.run_until_complete(resources.client.close())
        except Exception:  # closing must never raise
            logger.debug("closing the HTTP session failed", exc_info=True)


class OpenAIAgent:
    """Replies through an OpenAI-compatible ``/v1`` server (see the module docstring).

    :param base_url: the API root, including ``/v1`` (``http://localhost:8000/v1``).
    :param model: the served model name; ``None`` uses the server's only model.
    :param api_key: default: the userinfo of ``base_url`` (``http://KEY@host/v1``), else
        ``$OPENAI_API_KEY``, else ``"EMPTY"`` (vLLM's default).
    :param timeout: seconds per request attempt; ``max_retries``: retries after it.
    :param max_concurrency: requests in flight per event loop; default: the run's, else 64.
    :param extra_body: extra JSON fields of every request (vLLM's ``top_k``, ...).
    :param token_ids: ask for vLLM's sampled token ids and logprobs.
    :param backoff: first retry delay in seconds, doubling up to ``max_backoff``.
    """

    def __init__(
        self,
        base_url: str = "http://localhost:8000/v1",
        model: str | None = None,
        api_key: str | None = None,
        *,
        temperature: float = 1.0,
        top_p: float | None = None,
        max_tokens: int = 512,
        stop: Sequence[str] | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        max_concurrency: int | None = None,
        extra_body: dict[str, Any] | None = None,
        api: Api = "chat",
        token_ids: bool = True,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
    ) -> None:
        if api not in ("chat", "completions"):
            raise AgentError(f"api must be 'chat' or 'completions', got {api!r}")
        if (max_concurrency is not None and max_concurrency < 1) or max_retries < 0 or timeout <= 0:
            raise AgentError("max_concurrency must be >= 1, max_retries >= 0 and timeout > 0")
        # A key given as the URL's userinfo (http://KEY@host/v1) is sent as the bearer
        # token, as api_key would be: aiohttp refuses a URL credential beside the header.
        url = urlsplit(base_url.rstrip("/"))
        url_key = unquote(url.password or url.username or "")
        self.base_url = urlunsplit(url._replace(netloc=url.netloc.rpartition("@")[2]))
        self.model = model
        self.api_key = api_key or url_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self.temperature = temperature
        self.top_p = top_p
        self.max_tokens = max_tokens
        self.stop = list(stop) if stop else None
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.max_concurrency = int(max_concurrency or DEFAULT_MAX_CONCURRENCY)
        self._concurrency_is_explicit = max_concurrency is not None
        self.extra_body = dict(extra_body or {})
        self.api: Api = api
        self.wants_prompt_token_ids = api == "completions"
        self.request_token_ids = token_ids
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._per_loop: weakref.WeakKeyDictionary[Any, _LoopResources] = weakref.WeakKeyDictionary()
        # An agent dropped (or alive at exit) without close() still closes its clients.
        weakref.finalize(self, _close_clients, self._per_loop)

    async def get_action(
        self,
        messages: Messages,
        agent_state: Any,
        *,
        prompt_token_ids: list[int] | None = None,
        context: EpisodeContext | None = None,
    ) -> tuple[AgentAction, Any]:
        """Ask the server for the next reply (declaring the episode's tools in chat mode)."""
        tools = context.tools if context is not None else ()
        return await self.aget_action_reply(list(messages), prompt_token_ids, tools), agent_state

    def follow_concurrency(self, max_concurrency: int) -> None:
        """Take the run's ``max_concurrency`` as the request limit, unless set explicitly."""
        if self._concurrency_is_explicit or max_concurrency == self.max_concurrency:
            return
        self.max_concurrency = int(max_concurrency)
        for resources in self._per_loop.values():
            resources.semaphore = asyncio.Semaphore(self.max_concurrency)

    def check(self) -> list[str]:
        """Reach the server, resolve and verify the model; returns the served models."""
        return run_sync(self._check())

    async def aclose(self) -> None:
        """Close the client of the current event loop."""
        resources = self._per_loop.pop(asyncio.get_running_loop(), None)
        if resources is not None:
            await resources.client.close()

    def close(self) -> None:
        """Close every client this agent opened (from plain code)."""
        _close_clients(self._per_loop)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _resources(self) -> _LoopResources:
        loop = asyncio.get_running_loop()
        resources = self._per_loop.get(loop)
        if resources is None:
            resources = _LoopResources(
                client=JSONClient(self.base_url, self.api_key, self.timeout, self.max_concurrency),
                semaphore=asyncio.Semaphore(self.max_concurrency),
                model_lock=asyncio.Lock(),
            )
            self._per_loop[loop] = resources
            if loop is not running_background_loop():  # e.g. asyncio.run's loop
                resources.closer = _closed_with_its_loop(self._per_loop, loop, resources.client)
                asyncio.ensure_future(resources.closer.__anext__())
        return resources

    async def aget_action_reply(
        self,
        messages: Messages,
        prompt_token_ids: list[int] | None = None,
        tools: Sequence[dict[str, Any]] = (),
    ) -> AgentAction:
        """The reply as an :class:`AgentAction`."""
        await self._ensure_model()
        async with self._resources().semaphore:
            if self.api == "completions" and prompt_token_ids is not None:
                return await self._with_retries(
                    lambda: self._completion(prompt_token_ids), token_fields=True
                )
            return await self._with_retries(lambda: self._chat(messages, tools), token_fields=True)

    async def _post(self, path: str, prompt: dict[str, Any], logprobs: int) -> dict[str, Any]:
        """POST ``prompt`` with the sampling (and token id) fields; the answer, with choices."""
        payload = {"model": self.model, **prompt, **self._sampling()}
        if self.request_token_ids:
            payload.update(logprobs=logprobs, return_token_ids=True)
        body = await self._resources().client.request("POST", path, payload)
        choices = body.get("choices") if isinstance(body, dict) else None
        if not choices or not isinstance(choices[0], dict):
            raise AgentError(f"the server at {self.base_url} returned no choices: {body!r:.200}")
        return body  # type: ignore[no-any-return]

    async def _chat(self, messages: Messages, tools: Sequence[dict[str, Any]] = ()) -> AgentAction:
        prompt: dict[str, Any] = {"messages": [_as_openai(m) for m in messages]}
        if tools:
            prompt["tools"] = list(tools)
        body = await self._post("/chat/completions", prompt, logprobs=True)
        choice = body["choices"][0]
        message = choice.get("message") or {}
        text = message.get("content") or ""
        prompt_ids = body.get("prompt_token_ids")
        # Without prompt ids, sampled ids cannot follow the episode's prompt: retokenized.
        ids = choice.get("token_ids") if _is_ids(prompt_ids) else None
        logprobs = None
        content = (choice.get("logprobs") or {}).get("content")
        if _is_ids(ids) and isinstance(content, list) and len(content) == len(ids):
            logprobs = [float(item["logprob"]) for item in content]
        action = self._action(text, ids, logprobs, choice.get("finish_reason"), prompt_ids)
        action.tool_calls = message.get("tool_calls") or None  # parsed by the server
        return action

    async def _completion(self, prompt_token_ids: list[int]) -> AgentAction:
        body = await self._post("/completions", {"prompt": list(prompt_token_ids)}, logprobs=1)
        choice = body["choices"][0]
        ids = choice.get("token_ids")
        prompt_ids = choice.get("prompt_token_ids")
        logprobs = None
        token_logprobs = (choice.get("logprobs") or {}).get("token_logprobs")
        if _is_ids(ids) and isinstance(token_logprobs, list) and len(token_logprobs) == len(ids):
            logprobs = [float(x) if x is not None else float("nan") for x in token_logprobs]
        if not _is_ids(prompt_ids):
            prompt_ids = list(prompt_token_ids)
        return self._action(
            choice.get("text") or "", ids, logprobs, choice.get("finish_reason"), prompt_ids
        )

    def _sampling(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"temperature": self.temperature, "max_tokens": self.max_tokens}
        if self.top_p is not None:
            fields["top_p"] = self.top_p
        if self.stop:
            fields["stop"] = self.stop
        return {**fields, **self.extra_body}

    def _action(
        self, text: str, ids: Any, logprobs: list[float] | None, finish: Any, prompt_ids: Any
    ) -> AgentAction:
        info: dict[str, Any] = {"finish_reason": str(finish) if finish else None}
        truncated = str(finish) == "length"
        if not _is_ids(ids):
            return AgentAction(text=text, info=info, truncated=truncated)
        if logprobs is None:
            info["logprobs"] = "missing"
        prompt = list(prompt_ids) if _is_ids(prompt_ids) else None
        return AgentAction(text, list(ids), logprobs, info, prompt, truncated)

    async def _with_retries(
        self, call: Callable[[], Awaitable[T]], *, token_fields: bool = False
    ) -> T:
        """Run ``call``, retrying transient failures; ``token_fields``: it may send vLLM fields."""
        attempt = 0
        plain_retry = False
        while True:
            try:
                result = await call()
                if plain_retry:
                    logger.warning(
                        "%s does not accept the token-id fields (logprobs, return_token_ids); "
                        "asking for text only from now on, so trajectories are retokenized",
                        self.base_url,
                    )
                return result
            except ServerProtocolError as exc:
                strange = f"the server at {self.base_url} answered strangely: {exc}"
                raise AgentError(strange) from None
            except ServerStatusError as exc:
                if exc.status in (400, 422):
                    fields = token_fields and self.request_token_ids and not plain_retry
                    if fields and not _mentions_model(exc):
                        # Maybe the server rejects the vLLM fields: ask once without them.
                        self.request_token_ids = False
                        plain_retry = True
                        continue
                    if plain_retry:  # not the fields' fault after all
                        self.request_token_ids = True
                if exc.status not in RETRY_STATUS and exc.status < 500:
                    raise await self._status_error(exc) from None
                failure: _Failure = exc
            except (ServerUnreachable, ServerTimeout) as exc:
                failure = exc
            if attempt >= self.max_retries:
                raise self._gave_up(failure, attempt + 1) from None
            delay = min(self.max_backoff, self.backoff * 2**attempt) * random.uniform(0.5, 1.0)
            attempt += 1
            logger.info(
                "request to %s failed (%s); retry %d in %.2fs",
                self.base_url, failure, attempt, delay,
            )
            await asyncio.sleep(delay)

    def _gave_up(self, exc: _Failure, attempts: int) -> AgentError:
        tries = f"{attempts} attempt{'s' if attempts > 1 else ''}"
        if isinstance(exc, ServerTimeout):
            return AgentError(
                f"the server at {self.base_url} did not answer within {self.timeout:g}s "
                f"({tries}). Raise timeout=..., lower max_tokens or max_concurrency, or check "
                "that the server is not overloaded."
            )
        if isinstance(exc, ServerUnreachable):
            return AgentError(
                f"cannot reach an OpenAI-compatible server at {self.base_url} ({tries}: "
                f"{exc}). Check that the server is running and listening there (e.g. "
                "`vllm serve MODEL --port 8000` serves http://localhost:8000/v1), that base_url "
                "includes the /v1 prefix, and that no proxy or firewall blocks it."
            )
        return AgentError(
            f"the server at {self.base_url} kept failing with HTTP {exc.status} "
            f"({tries}): {exc.message}{self._token_prompt_hint()}"
        )

    async def _status_error(self, exc: ServerStatusError) -> AgentError:
        status = exc.status
        if status in (401, 403):
            return AgentError(
                f"the server at {self.base_url} rejected the API key (HTTP {status}): "
                f"{exc.message}. Pass api_key=... or set OPENAI_API_KEY."
            )
        if status == 404 or _mentions_model(exc):
            try:
                models: list[str] | None = await self._served_models()
            except Exception:  # noqa: BLE001 - only a hint for the message: go without
                models = None
            if models is not None and self.model not in models:
                return self._unknown_model(models)
            if status == 404:
                return AgentError(
                    f"{self.base_url} answered HTTP 404 for the {self.api} API: "
                    f"{exc.message}. Check that base_url ends with /v1 and that the server "
                    f"implements /{'chat/' if self.api == 'chat' else ''}completions."
                )
        return AgentError(
            f"the server at {self.base_url} refused the request (HTTP {status}): {exc.message}"
            + self._token_prompt_hint()
        )

    def _token_prompt_hint(self) -> str:
        if self.api != "completions":
            return ""
        return ("; api=completions sends the prompt as token ids, which some servers "
                "(llama.cpp's) refuse: use api=chat there")  # fmt: skip

    def _unknown_model(self, models: list[str]) -> AgentError:
        served = ", ".join(repr(m) for m in models) or "nothing"
        return AgentError(
            f"model {self.model!r} is not served by {self.base_url}; it serves {served}. "
            "Pass model=<one of them> (vLLM serves the name given to `vllm serve` or "
            "--served-model-name)."
        )

    async def _served_models(self) -> list[str]:
        client = self._resources().client
        page = await self._with_retries(lambda: client.request("GET", "/models"))
        data = page.get("data") if isinstance(page, dict) else None
        if not isinstance(data, list):
            raise AgentError(f"{self.base_url}/models answered without a model list: {page!r:.200}")
        return [str(m.get("id")) for m in data if isinstance(m, dict)]

    async def _ensure_model(self) -> None:
        if self.model is not None:
            return
        async with self._resources().model_lock:
            if self.model is not None:
                return
            models = await self._served_models()
            if len(models) != 1:
                served = ", ".join(repr(m) for m in models) or "no model"
                raise AgentError(f"{self.base_url} serves {served}; choose one with model=...")
            self.model = models[0]

    async def _check(self) -> list[str]:
        models = await self._served_models()
        await self._ensure_model()
        if self.model not in models:
            raise self._unknown_model(models)
        return models


def _as_openai(message: Message) -> Message:
    """A message as OpenAI's API takes it: a tool call's arguments as a JSON string."""
    calls = message.get("tool_calls")
    if not calls:
        return message
    wire = [
        {**c, "function": {**c["function"], "arguments": _json_text(c["function"])}} for c in calls
    ]
    return Message(**{**message, "tool_calls": wire})  # type: ignore[typeddict-item]


def _json_text(function: dict[str, Any]) -> str:
    arguments = function.get("arguments", {})
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _is_ids(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(i, int) for i in value)


def _mentions_model(exc: ServerStatusError) -> bool:
    text = exc.message.lower()
    return "model" in text and any(
        w in text for w in ("not exist", "not found", "unknown", "does not")
    )
