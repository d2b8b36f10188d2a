"""An agent backed by an OpenAI-compatible server (vLLM, SGLang, OpenAI, ...).

Natively async, with one aiohttp session per event loop (:mod:`.openai_http` says why
not the ``openai`` SDK). Transient failures (connection, timeout, HTTP 408/409/429,
5xx) are retried with backoff and jitter by the core's retry policy
(:mod:`agentsgym.retry`); the final error says what to check (:mod:`.openai_failures`).

By default it asks for vLLM's ``logprobs`` and ``return_token_ids`` (vLLM >= 0.10.2):
the sampled ids, logprobs and the server's prompt ids go into the trajectory verbatim.
A chat reply without prompt ids is text only (what the model conditioned on is unknown;
:mod:`.openai_wire` reads replies); a request that a server refuses with these fields
(HTTP 400/422) is sent again without them, each request in flight on its own, and later
requests go without them. ``api="completions"`` is token-in: the prompt is the episode's
exact ids, so the server conditions on exactly what the trajectory records (RL with
vLLM); without ids (a game master) it falls back to the chat API. ``api="generate"`` is
token-in through vLLM's own generate API (``/inference/v1/generate``, vLLM >= 0.32
started with ``--enable-scale-out``), whose replies say which weights sampled each
token (the version a trainer set with ``/update_weight_version``): the reply's
``policy_versions``. Its sampling fields, ``extra_body`` included, go in the request's
``sampling_params``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

from agentsgym.agents import openai_failures as failures
from agentsgym.agents.openai_http import JSONClient, ServerProtocolError, ServerStatusError
from agentsgym.agents.openai_wire import (
    TOKEN_ID_FIELDS,
    chat_action,
    chat_prompt,
    completion_action,
    first_choice,
    generate_action,
)
from agentsgym.aio import run_sync
from agentsgym.errors import AgentError
from agentsgym.loop_pools import PerLoop
from agentsgym.retry import Attempts, RetryPolicy, retry_async
from agentsgym.types import AgentAction, EpisodeContext, Messages

if TYPE_CHECKING:
    from typing_extensions import Self

logger = logging.getLogger(__name__)

T = TypeVar("T")
Api = Literal["chat", "completions", "generate"]
GENERATE_PATH = "/inference/v1/generate"
"""vLLM's token-in generate API, from the server's root (not under ``/v1``)."""
DEFAULT_MAX_CONCURRENCY = 64


@dataclass
class _LoopResources:
    """What the agent holds per event loop: a client and the loop-bound primitives."""

    client: JSONClient
    semaphore: asyncio.Semaphore
    model_lock: asyncio.Lock


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
        if api not in ("chat", "completions", "generate"):
            raise AgentError(f"api must be 'chat', 'completions' or 'generate', got {api!r}")
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
        self.wants_prompt_token_ids = api in ("completions", "generate")
        self.request_token_ids = token_ids
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._per_loop: PerLoop[_LoopResources] = PerLoop(
            self._new_resources,
            lambda resources: resources.client.close(),
            abandon=lambda resources: resources.client.abandon(),
            is_closed=lambda resources: resources.client.closed,
        )
        # An agent dropped (or alive at exit) without close() still closes its clients.
        weakref.finalize(self, self._per_loop.close)

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
        await self._per_loop.aclose()

    def close(self) -> None:
        """Close every client this agent opened (from plain code)."""
        self._per_loop.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def retry_policy(self) -> RetryPolicy:
        """How a request is retried: ``max_retries`` after the first attempt, backoff
        from ``backoff`` doubling up to ``max_backoff``, no window."""
        return RetryPolicy(
            retry_window=None,
            max_attempts=self.max_retries + 1,
            backoff=self.backoff,
            max_backoff=self.max_backoff,
        )

    def _new_resources(self) -> _LoopResources:
        return _LoopResources(
            client=JSONClient(self.base_url, self.api_key, self.timeout, self.max_concurrency),
            semaphore=asyncio.Semaphore(self.max_concurrency),
            model_lock=asyncio.Lock(),
        )

    def _resources(self) -> _LoopResources:
        return self._per_loop.get()

    async def aget_action_reply(
        self,
        messages: Messages,
        prompt_token_ids: list[int] | None = None,
        tools: Sequence[dict[str, Any]] = (),
    ) -> AgentAction:
        """The reply as an :class:`AgentAction`."""
        await self._ensure_model()
        if self.api == "generate" and prompt_token_ids is not None:
            ids = list(prompt_token_ids)

            async def send(token_fields: bool) -> AgentAction:
                body = await self._generate(ids, token_fields)
                return generate_action(first_choice(body, self.base_url), ids, body)

        elif self.api == "completions" and prompt_token_ids is not None:
            ids = list(prompt_token_ids)

            async def send(token_fields: bool) -> AgentAction:
                body = await self._post("/completions", {"prompt": ids}, 1, token_fields)
                return completion_action(first_choice(body, self.base_url), ids, body)

        else:
            prompt = chat_prompt(messages, tools)

            async def send(token_fields: bool) -> AgentAction:
                body = await self._post("/chat/completions", prompt, True, token_fields)
                return chat_action(body, first_choice(body, self.base_url))

        async with self._resources().semaphore:
            return await self._retried(lambda: self._with_token_fields(send))

    async def _with_token_fields(self, send: Callable[[bool], Awaitable[T]]) -> T:
        """One attempt of a request that may carry vLLM's token-id fields.

        A server that refuses them (an OpenAI-strict one answers HTTP 400/422) gets
        this very request again without them, whether or not a request in flight
        beside it already found out; once one succeeds that way, later requests go
        without them. A request refused without the fields too was not refused for
        them: that refusal is the answer, and the fields stay on.
        """
        token_fields = self.request_token_ids
        try:
            return await send(token_fields)
        except ServerStatusError as exc:
            if not (token_fields and failures.refuses_token_fields(exc)):
                raise
        result = await send(False)
        if self.request_token_ids:
            self.request_token_ids = False
            logger.warning(
                "%s does not accept the token-id fields (logprobs, return_token_ids); "
                "asking for text only from now on, so trajectories are retokenized",
                self.base_url,
            )
        return result

    async def _post(
        self, path: str, prompt: dict[str, Any], logprobs: int, token_fields: bool
    ) -> dict[str, Any]:
        """POST ``prompt`` with the sampling (and token id) fields; the JSON answer."""
        payload = {"model": self.model, **prompt, **self._sampling()}
        if token_fields:
            payload.update(dict(zip(TOKEN_ID_FIELDS, (logprobs, True))))
        return await self._resources().client.request("POST", path, payload)  # type: ignore[no-any-return]

    async def _generate(self, ids: list[int], logprobs: bool) -> dict[str, Any]:
        """POST the episode's ids to vLLM's generate API; the JSON answer."""
        sampling = self._sampling()
        if logprobs:
            sampling["logprobs"] = 0  # the sampled token's own logprob, no alternatives
        payload = {
            "model": self.model,
            "token_ids": ids,
            "sampling_params": sampling,
            "output_mode": "text",
        }
        url = self.base_url.removesuffix("/v1") + GENERATE_PATH
        return await self._resources().client.request("POST", url, payload)  # type: ignore[no-any-return]

    def _sampling(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"temperature": self.temperature, "max_tokens": self.max_tokens}
        if self.top_p is not None:
            fields["top_p"] = self.top_p
        if self.stop:
            fields["stop"] = self.stop
        return {**fields, **self.extra_body}

    async def _retried(self, call: Callable[[], Awaitable[T]], *, ask_models: bool = True) -> T:
        """``call()``, retried by :attr:`retry_policy` while it fails transiently; a
        failure as an :class:`AgentError` that says what to check (``ask_models``: with
        the served models when the server did not know the model or the path)."""
        try:
            return await retry_async(
                call,
                self.retry_policy,
                retryable=failures.is_transient,
                give_up=self._gave_up,
                on_retry=self._log_retry,
            )
        except ServerProtocolError as exc:
            raise AgentError(f"the server at {self.base_url} answered strangely: {exc}") from None
        except ServerStatusError as exc:
            if not ask_models:
                raise failures.refused(self.base_url, self.api, self.model, exc, None) from None
            raise await self._refused(exc) from None

    def _gave_up(self, exc: Exception, how: Attempts) -> BaseException:
        if how.exhausted is None:
            return exc  # not transient: sorted out by _retried
        return failures.gave_up(self.base_url, self.timeout, self.api, exc, how.attempts)

    def _log_retry(self, exc: Exception, attempts: int, wait: float) -> None:
        logger.info(
            "request to %s failed (%s); retry %d in %.2fs", self.base_url, exc, attempts, wait
        )

    async def _refused(self, exc: ServerStatusError) -> AgentError:
        models: list[str] | None = None
        if exc.status == 404 or failures.mentions_model(exc):
            try:
                models = await self._served_models()
            except Exception:  # noqa: BLE001 - only a hint for the message: go without
                models = None
        return failures.refused(self.base_url, self.api, self.model, exc, models)

    async def _served_models(self) -> list[str]:
        client = self._resources().client
        page = await self._retried(lambda: client.request("GET", "/models"), ask_models=False)
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
            raise failures.unknown_model(self.base_url, self.model, models)
        return models
