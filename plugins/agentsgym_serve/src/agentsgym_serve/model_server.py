"""An OpenAI-compatible server on loopback, for tests and offline demos.

    from agentsgym_serve.model_server import OpenAICompatServer
    from agentsgym_trl import ModelPolicy      # a local model (agentsgym-trl)

    with OpenAICompatServer(ModelPolicy("tiny"), models=["tiny"]) as server:
        agent = agentsgym.make_agent("openai", base_url=server.base_url, model="tiny")
        ...

It serves ``GET /v1/models``, ``POST /v1/chat/completions`` and ``POST
/v1/completions`` (plain Starlette routes on uvicorn in a background thread, port chosen
by the OS: it needs no FastAPI)
and answers with a *policy*: :class:`ScriptedPolicy` (fixed or computed replies), or
any object with the :class:`Policy` methods, such as agentsgym-trl's ``ModelPolicy``
(a local causal LM, e.g. the tiny random model, rendering chat messages with its
tokenizer's template as vLLM does). A policy's replies need the fields of
:class:`Reply`.

Chat requests are rendered as vLLM renders them: with the request's ``tools``, and a
tool call's JSON-text ``arguments`` parsed into an object
(:func:`agentsgym.runtime.parse_tool_arguments`, which the model gateway's agent
backend renders with too).

With ``vllm=True`` (default) it behaves like vLLM: ``return_token_ids: true`` adds
``prompt_token_ids`` (top level for chat, on the choice for completions) and
``token_ids`` on the choice, and ``logprobs`` returns one logprob per generated
token. ``stream: true`` answers with Server-Sent Events as vLLM writes them: a chunk
per generated token (its text, its ``token_ids`` and logprob when asked for; the first
chunk carries ``prompt_token_ids``), the finish reason, usage when
``stream_options.include_usage`` asks for it, then ``data: [DONE]``. A reply without
ids streams a chunk per word. With ``vllm=False`` it behaves like OpenAI's API: unknown request fields are
rejected with HTTP 400 and no token ids are ever returned.

Weights and versions: ``POST /v1/update_weights`` with ``{"checkpoint": FOLDER}``
loads a model folder into a policy that has ``load_weights`` (agentsgym-trl's
``ModelPolicy``); ``{}`` or ``{"version": N}`` only moves the version (a scripted
policy has no weights). It answers ``{"policy_version": N}``, and every completion
then carries a top-level ``policy_version``: the version that generated it (the
policy's own when it reports one), which the ``openai`` agent records on each turn.
:meth:`OpenAICompatServer.update_weights` does the same from Python.

With ``vllm=True`` it also answers vLLM's RL API (pausing with requests kept, weight
versions, ``reload_weights``) and its token-in generate API with each token's weight
version: see :mod:`agentsgym_serve.vllm_rl`.

For tests of failure handling: :meth:`OpenAICompatServer.fail_next` answers the next
requests with an HTTP error, ``delay`` holds every request, ``requests`` records
the request bodies and ``max_in_flight`` the largest number of requests served at
once.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agentsgym import Messages
from agentsgym.runtime import parse_tool_arguments
from agentsgym_serve.server import BackgroundServer
from agentsgym_serve.vllm_rl import VLLMEngine, vllm_routes

VLLM_KEEP_ALIVE_SECONDS = 5
"""uvicorn's default keep-alive, which vLLM's OpenAI server keeps."""


@dataclass
class Reply:
    """What a policy answers: text, and (when it has them) ids and logprobs."""

    text: str
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_token_ids: list[int] | None = None
    finish_reason: str = "stop"
    policy_version: int | None = None


class Policy(Protocol):
    def chat(self, messages: Messages, params: dict[str, Any]) -> Reply: ...

    def complete(self, prompt: str | list[int], params: dict[str, Any]) -> Reply: ...


class ScriptedPolicy:
    """Replies from a list (in order, cycling) or from ``reply(messages) -> str`` (a
    completion request has no messages: it is called with ``[]``).

    With a ``tokenizer`` it also reports token ids like vLLM would: the chat-template
    rendering of the messages (with the request's ``tools``) as prompt ids, and the
    reply's tokens followed by the template's end-of-turn token as completion ids
    (logprobs 0.0). Replies are text: it has no tool parser, so calls come back as the
    text that holds them, for the env to parse.
    """

    run_inline = True  # cheap: answered on the server's loop, no thread hop

    def __init__(
        self,
        replies: Sequence[str] | Callable[[Messages], str] = ("[50]",),
        tokenizer: Any = None,
    ) -> None:
        self._reply = replies if callable(replies) else None
        self._cycle = itertools.cycle(list(replies)) if not callable(replies) else None
        self._lock = threading.Lock()
        self.chat_tokenizer = None
        if tokenizer is not None:
            from agentsgym import load_tokenizer
            from agentsgym.runtime import ChatTokenizer

            self.chat_tokenizer = ChatTokenizer(load_tokenizer(tokenizer))

    def _text(self, messages: Messages) -> str:
        if self._reply is not None:
            return self._reply(messages)
        assert self._cycle is not None
        with self._lock:
            return next(self._cycle)

    def chat(self, messages: Messages, params: dict[str, Any]) -> Reply:
        text = self._text(messages)
        if self.chat_tokenizer is None:
            return Reply(text)
        chat = self.chat_tokenizer
        prompt = (chat.with_tools(params["tools"]) if params.get("tools") else chat).encode_prompt(
            messages
        )
        ids = chat.encode_model_text(text) + chat.eot_ids
        return Reply(text, ids, [0.0] * len(ids), prompt)

    def complete(self, prompt: str | list[int], params: dict[str, Any]) -> Reply:
        text = self._text([])
        if self.chat_tokenizer is None:
            return Reply(text)
        chat = self.chat_tokenizer
        ids = chat.encode_model_text(text) + chat.eot_ids
        prompt_ids = prompt if isinstance(prompt, list) else chat.encode_model_text(prompt)
        return Reply(text, ids, [0.0] * len(ids), list(prompt_ids))


CHAT_FIELDS = {
    "model",
    "tools",
    "tool_choice",
    "messages",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "logprobs",
    "top_logprobs",
    "n",
    "seed",
    "stream",
    "stream_options",
    "user",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "response_format",
}
COMPLETION_FIELDS = (
    CHAT_FIELDS - {"messages", "max_completion_tokens", "top_logprobs", "response_format"}
) | {
    "prompt",
    "echo",
    "suffix",
    "best_of",
}


class OpenAICompatServer:
    """A loopback OpenAI-compatible server answering with ``policy`` (see the module docstring).

    :param policy: a :class:`ScriptedPolicy`, :class:`ModelPolicy` or anything with
        ``chat(messages, params)`` and ``complete(prompt, params)``.
    :param models: the served model names (requests for others get HTTP 404).
    :param vllm: behave like vLLM (token ids on request) or like OpenAI (strict).
    :param api_key: when set, requests must carry it as a bearer token.
    :param delay: seconds every request is held before it is answered.
    :param keep_requests: how many request bodies ``requests`` keeps, the newest
        (default: all, for tests; a long run that serves a model gives a bound).
    """

    def __init__(
        self,
        policy: Policy,
        *,
        models: Iterable[str] = ("agentsgym-test",),
        vllm: bool = True,
        api_key: str | None = None,
        delay: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        keep_requests: int | None = None,
    ) -> None:
        self.policy = policy
        self.models = list(models)
        self.vllm = vllm
        self.api_key = api_key
        self.delay = delay
        self.host = host
        self.port = port
        self.requests: list[dict[str, Any]] | collections.deque[dict[str, Any]] = (
            [] if keep_requests is None else collections.deque(maxlen=keep_requests)
        )
        self.in_flight = 0
        self.max_in_flight = 0
        self._failures: list[int] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._background: BackgroundServer | None = None
        self.policy_version = 0
        self.engine = VLLMEngine()
        """vLLM's RL API state (``vllm=True``): pause, weight label (:mod:`.vllm_rl`)."""
        self.app = self._build_app()

    # ------------------------------------------------------------------ control
    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def fail_next(self, count: int = 1, status: int = 503) -> None:
        """Answer the next ``count`` completion requests with HTTP ``status`` (0 clears)."""
        with self._lock:
            self._failures = [status] * count

    def update_weights(
        self,
        checkpoint: str | None = None,
        *,
        state_dict: Any = None,
        version: int | None = None,
    ) -> int:
        """Load new weights into the policy (a folder or a ``state_dict``; neither: the
        version moves only) and return the new version (``version``, default: one more)."""
        if checkpoint is not None or state_dict is not None:
            loader = getattr(self.policy, "load_weights", None)
            if loader is None:
                raise ValueError(
                    f"this server's policy ({type(self.policy).__name__}) has no weights to "
                    "load; send only a version, or serve a ModelPolicy"
                )
            new = int(loader(checkpoint, state_dict=state_dict, version=version))
        else:
            new = self.policy_version + 1 if version is None else int(version)
        with self._lock:
            self.policy_version = new
        return new

    def start(self) -> OpenAICompatServer:
        # uvicorn's default keep-alive (5 s), as vLLM's server runs it: clients must
        # cope with the server closing idle connections.
        self._background = BackgroundServer(
            self.app,
            self.host,
            self.port,
            keep_alive_seconds=VLLM_KEEP_ALIVE_SECONDS,
            name="agentsgym-test-server",
        ).start()
        self.port = self._background.port
        return self

    def stop(self) -> None:
        if self._background is not None:
            self._background.stop()
            self._background = None

    def __enter__(self) -> OpenAICompatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ app
    def _build_app(self) -> Starlette:
        def error(status: int, message: str, kind: str) -> JSONResponse:
            if self.vllm:
                body: dict[str, Any] = {
                    "object": "error",
                    "message": message,
                    "type": kind,
                    "param": None,
                    "code": status,
                }
            else:
                body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
            return JSONResponse(body, status_code=status)

        def unauthorised(request: Request) -> JSONResponse | None:
            if self.api_key is None:
                return None
            if request.headers.get("authorization") != f"Bearer {self.api_key}":
                return error(401, "Incorrect API key provided.", "invalid_request_error")
            return None

        async def models(request: Request) -> Response:
            denied = unauthorised(request)
            if denied is not None:
                return denied
            return JSONResponse(
                {
                    "object": "list",
                    "data": [
                        {"id": m, "object": "model", "created": 0, "owned_by": "agentsgym"}
                        for m in self.models
                    ],
                }
            )

        async def serve(request: Request, kind: str) -> Response:
            denied = unauthorised(request)
            if denied is not None:
                return denied
            body = await request.json()
            with self._lock:
                self.requests.append(body)
                failure = self._failures.pop(0) if self._failures else None
            if failure is not None:
                return error(failure, f"injected failure {failure}", "InternalServerError")
            allowed = CHAT_FIELDS if kind == "chat" else COMPLETION_FIELDS
            if not self.vllm:
                unknown = sorted(set(body) - allowed)
                if unknown:
                    return error(
                        400,
                        f"Unrecognized request argument supplied: {unknown[0]}",
                        "invalid_request_error",
                    )
            if body.get("model") not in self.models:
                return error(
                    404, f"The model `{body.get('model')}` does not exist.", "NotFoundError"
                )
            with self._lock:
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                if self.delay:
                    await asyncio.sleep(self.delay)
                answer = self.policy.chat if kind == "chat" else self.policy.complete
                argument = (
                    parse_tool_arguments(body["messages"]) if kind == "chat" else body["prompt"]
                )
                if getattr(self.policy, "run_inline", False):
                    reply = answer(argument, body)
                else:
                    reply = await run_in_threadpool(answer, argument, body)
            finally:
                with self._lock:
                    self.in_flight -= 1
            if body.get("stream"):
                events = self._stream(kind, body, reply)
                return StreamingResponse(events, media_type="text/event-stream")
            return JSONResponse(self._response(kind, body, reply))

        async def update_weights(request: Request) -> Response:
            denied = unauthorised(request)
            if denied is not None:
                return denied
            body = await request.json() if await request.body() else {}
            checkpoint, version = body.get("checkpoint"), body.get("version")
            if version is not None and not isinstance(version, int):
                return error(400, f"version must be an integer, got {version!r}", "BadRequestError")
            try:
                new = await run_in_threadpool(self.update_weights, checkpoint, version=version)
            except (ValueError, OSError) as exc:
                return error(400, f"cannot load the weights: {exc}", "BadRequestError")
            return JSONResponse({"policy_version": new})

        async def chat(request: Request) -> Response:
            return await serve(request, "chat")

        async def completions(request: Request) -> Response:
            return await serve(request, "completions")

        routes = [
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/update_weights", update_weights, methods=["POST"]),
        ]
        if self.vllm:
            routes += vllm_routes(self)
        return Starlette(routes=routes)

    def _response(self, kind: str, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        with_ids = self.vllm and bool(body.get("return_token_ids")) and reply.token_ids is not None
        want_logprobs = bool(body.get("logprobs")) and reply.logprobs is not None
        tokens = [self.token_text(i) for i in reply.token_ids or []]
        n_completion = len(reply.token_ids or []) or len(reply.text.split())
        n_prompt = len(reply.prompt_token_ids or [])
        choice: dict[str, Any] = {"index": 0, "finish_reason": reply.finish_reason}
        response: dict[str, Any] = {
            "id": f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-{next(self._ids)}",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [choice],
            "usage": {
                "prompt_tokens": n_prompt,
                "completion_tokens": n_completion,
                "total_tokens": n_prompt + n_completion,
            },
        }
        if self.vllm:  # an extension field; a strict (OpenAI-like) server sends none
            own = getattr(reply, "policy_version", None)
            response["policy_version"] = own if own is not None else self.policy_version
        if kind == "chat":
            response["object"] = "chat.completion"
            choice["message"] = {"role": "assistant", "content": reply.text}
            choice["logprobs"] = (
                {
                    "content": [
                        {"token": t, "logprob": lp, "bytes": list(t.encode()), "top_logprobs": []}
                        for t, lp in zip(tokens, reply.logprobs or [])
                    ]
                }
                if want_logprobs
                else None
            )
            if with_ids:
                choice["token_ids"] = reply.token_ids
                response["prompt_token_ids"] = reply.prompt_token_ids
        else:
            response["object"] = "text_completion"
            choice["text"] = reply.text
            choice["logprobs"] = (
                {
                    "tokens": tokens,
                    "token_logprobs": reply.logprobs,
                    "top_logprobs": [{t: lp} for t, lp in zip(tokens, reply.logprobs or [])],
                    "text_offset": [0] * len(tokens),
                }
                if want_logprobs
                else None
            )
            if with_ids:
                choice["token_ids"] = reply.token_ids
                choice["prompt_token_ids"] = reply.prompt_token_ids
        return response

    def _stream(self, kind: str, body: dict[str, Any], reply: Reply) -> Iterable[bytes]:
        """The events of ``reply`` as vLLM streams them (see the module docstring)."""
        whole = self._response(kind, body, reply)
        head = {k: whole[k] for k in ("id", "created", "model", "policy_version") if k in whole}
        head["object"] = "chat.completion.chunk" if kind == "chat" else "text_completion"
        with_ids = "token_ids" in whole["choices"][0]
        want_logprobs = whole["choices"][0]["logprobs"] is not None

        def event(payload: dict[str, Any]) -> bytes:
            return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"

        def choice(text: str, ids: list[int] | None, logprob: float | None) -> dict[str, Any]:
            part: dict[str, Any] = {"index": 0}
            token = self.token_text(ids[0]) if ids else ""
            if kind == "chat":
                part["delta"] = {"content": text}
                entry = {"token": token, "logprob": logprob, "bytes": list(token.encode())}
                lp = {"content": [{**entry, "top_logprobs": []}]}
            else:
                part["text"] = text
                lp = {
                    "tokens": [token],
                    "token_logprobs": [logprob],
                    "top_logprobs": [{token: logprob}],
                    "text_offset": [0],
                }
            part["logprobs"] = lp if want_logprobs and logprob is not None else None
            part["finish_reason"] = None
            if with_ids:
                part["token_ids"] = ids or []
            return part

        first = True
        if kind == "chat":
            opening: dict[str, Any] = {**head}
            if with_ids:
                opening["prompt_token_ids"] = reply.prompt_token_ids
            delta = {"role": "assistant", "content": ""}
            opening["choices"] = [{"index": 0, "delta": delta, "logprobs": None}]
            opening["choices"][0]["finish_reason"] = None
            yield event(opening)
            first = False
        for text, token_id, logprob in self._pieces(reply):
            part = choice(text, None if token_id is None else [token_id], logprob)
            if first and with_ids:
                part["prompt_token_ids"] = reply.prompt_token_ids
                first = False
            yield event({**head, "choices": [part]})
        closing = choice("", None, None)
        closing.pop("token_ids", None)
        closing["finish_reason"] = reply.finish_reason
        if kind == "chat":
            closing["delta"] = {}
        yield event({**head, "choices": [closing]})
        options = body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage"):
            yield event({**head, "choices": [], "usage": whole["usage"]})
        yield b"data: [DONE]\n\n"

    def _pieces(self, reply: Reply) -> list[tuple[str, int | None, float | None]]:
        """``reply`` cut as a stream sends it: per token ``(text, id, logprob)``, the
        text of each token being what it adds to the decoded reply (so the pieces join
        to ``reply.text``); per word without ids."""
        if not reply.token_ids:
            return [(word, None, None) for word in re.findall(r"\s*\S+|\s+$", reply.text)]
        tokenizer = self._tokenizer()
        logprobs = reply.logprobs or []
        pieces, emitted = [], 0
        for position, token_id in enumerate(reply.token_ids):
            decoded = reply.text if position == 0 else ""  # no tokenizer: all text first
            if tokenizer is not None:
                decoded = tokenizer.decode(
                    reply.token_ids[: position + 1], skip_special_tokens=True
                )
            common = 0
            limit = min(len(decoded), len(reply.text))
            while common < limit and decoded[common] == reply.text[common]:
                common += 1
            end = max(emitted, common)
            if position == len(reply.token_ids) - 1:
                end = len(reply.text)
            logprob = logprobs[position] if position < len(logprobs) else None
            pieces.append((reply.text[emitted:end], token_id, logprob))
            emitted = end
        return pieces

    def _tokenizer(self) -> Any:
        tokenizer = getattr(self.policy, "tokenizer", None)
        if tokenizer is None:
            chat = getattr(self.policy, "chat_tokenizer", None)
            tokenizer = getattr(chat, "tokenizer", None)
        return tokenizer

    def token_text(self, token_id: int) -> str:
        tokenizer = getattr(self.policy, "tokenizer", None)
        if tokenizer is None:
            chat = getattr(self.policy, "chat_tokenizer", None)
            tokenizer = getattr(chat, "tokenizer", None)
        if tokenizer is None:
            return f"token_id:{token_id}"
        return tokenizer.decode([token_id])
