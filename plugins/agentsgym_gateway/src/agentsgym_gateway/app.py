"""The gateway's HTTP application: OpenAI's routes, per session, recorded.

Routes, each also under a path prefix ``/s/<key>`` for programs that cannot set a key:
``GET /v1/models``, ``POST /v1/chat/completions``, ``POST /v1/completions`` and
``POST /v1/responses`` (:mod:`agentsgym_gateway.responses_api`). Every call needs a
session's key; the answer is the backend's (see :mod:`agentsgym_gateway.wire`).
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from agentsgym_gateway.backend import Backend, BackendAnswer, BackendStream
from agentsgym_gateway.jsonio import LARGE_BODY_BYTES, dumps, loads_request
from agentsgym_gateway.limits import BodyTooLarge, read_bounded, release_freed_memory
from agentsgym_gateway.records import CallRecord, Endpoint
from agentsgym_gateway.relay import StreamRelay
from agentsgym_gateway.responses_api import UNSUPPORTED, to_chat_body, to_response
from agentsgym_gateway.sessions import GatewaySession, SessionStore
from agentsgym_gateway.streaming import chat_events, completion_events, response_events
from agentsgym_gateway.tool_parsing import with_parsed_calls
from agentsgym_gateway.wire import (
    BackendRequest,
    prepare,
    program_view,
    record_of,
    requested_choices,
)

logger = logging.getLogger(__name__)

ERROR_TEXT_CHARS = 2000
"""How much of a backend's error body a failed call's record keeps."""
SESSION_CLOSED = (
    "the gateway session of this call was closed while the call was in flight (its "
    "episode had ended): the answer was not recorded, so it is not given either"
)
"""What a program is told of a call answered after its session closed (HTTP 410)."""


def _error_body(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _error(status: int, message: str, kind: str, code: str | None = None) -> Response:
    body = dumps(_error_body(message, kind, code))
    return Response(body, status, media_type="application/json")


def _closed() -> BackendAnswer:
    """The answer to a call whose session closed before its answer could be recorded."""
    body = _error_body(SESSION_CLOSED, "invalid_request_error", "session_closed")
    return BackendAnswer(410, dumps(body), "application/json")


def _closed_event() -> bytes:
    """The Server-Sent Event that ends a stream whose session closed before its end."""
    body = _error_body(SESSION_CLOSED, "invalid_request_error", "session_closed")
    return b"data: " + dumps(body) + b"\n\n"


def _releasing(response: Response, large: bool) -> Response:
    """``response``, and for a call with a large body (at least
    :data:`~agentsgym_gateway.jsonio.LARGE_BODY_BYTES`) the memory it freed given back to
    the system once it is sent (:func:`~agentsgym_gateway.limits.release_freed_memory`,
    in a thread)."""
    if large:
        response.background = BackgroundTask(asyncio.to_thread, release_freed_memory)
    return response


def _failed(kind: str, status: int, content: bytes) -> CallRecord:
    """The record of a failed call: its status and (the head of) its error body."""
    record = CallRecord(index=-1, endpoint="chat" if kind == "chat" else "completions")
    record.status = status
    record.error = content[:ERROR_TEXT_CHARS].decode("utf-8", "replace")
    return record


def _streamed_records(
    kind: str, body: dict[str, Any], relay: StreamRelay, failure: str | None
) -> list[CallRecord]:
    """The records of a relayed stream: one per choice, or one failed record."""
    failure = failure or relay.assembler.error
    response = relay.assembler.response()
    if failure is None and not response["choices"]:
        failure = "the backend's stream held no choice"
    if failure is not None:
        return [_failed(kind, 502, failure.encode())]
    records = []
    for index, choice in enumerate(response["choices"]):
        record = record_of(kind, body, response, index)
        record.policy_versions = relay.assembler.token_versions(choice["index"])
        if record.policy_versions:
            record.policy_version = min(record.policy_versions)
        records.append(record)
    return records


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization") or ""
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


class GatewayApp:
    """Builds the app over a session store and a backend: Starlette's routing, no
    framework per request above it (FastAPI's dependency machinery cost twice the
    routing's CPU per call); requests are read as JSON objects at the boundary."""

    def __init__(
        self,
        store: SessionStore,
        backend: Backend,
        max_body_bytes: int,
        tool_parser: str | None = None,
    ) -> None:
        self.store = store
        self.backend = backend
        self.max_body_bytes = max_body_bytes
        self.tool_parser = tool_parser
        self.backend_token_ids = True
        """Whether the backend takes ``return_token_ids``; turned off (and the calls
        recorded ``retokenized``) the first time it refuses the field."""

    def session_of(self, request: Request, key: str | None) -> GatewaySession | None:
        return self.store.find(key if key is not None else _bearer(request))

    def build(self) -> Starlette:
        @asynccontextmanager
        async def lifespan(app: Starlette) -> Any:
            yield
            await self.backend.aclose()

        # The key comes from the path prefix or the Authorization header, never from a
        # query string (URLs end up in logs): handlers read the path's own parameter.
        def path_key(request: Request) -> str | None:
            return request.path_params.get("key")

        async def models(request: Request) -> Response:
            if self.session_of(request, path_key(request)) is None:
                return self._unauthorised()
            return self._passthrough(await self.backend.get("/models"))

        async def chat(request: Request) -> Response:
            return await self.forward(request, path_key(request), "chat")

        async def completions(request: Request) -> Response:
            return await self.forward(request, path_key(request), "completions")

        async def responses(request: Request) -> Response:
            return await self.respond(request, path_key(request))

        routes = []
        for prefix in ("", "/s/{key}"):
            routes += [
                Route(prefix + "/v1/models", models, methods=["GET"]),
                Route(prefix + "/v1/chat/completions", chat, methods=["POST"]),
                Route(prefix + "/v1/completions", completions, methods=["POST"]),
                Route(prefix + "/v1/responses", responses, methods=["POST"]),
            ]
        return Starlette(routes=routes, lifespan=lifespan)

    @staticmethod
    def _unauthorised() -> Response:
        return _error(
            401,
            "no open gateway session has this key: use the OPENAI_API_KEY (or base URL) "
            "the gateway gave this program",
            "invalid_request_error",
            "invalid_api_key",
        )

    @staticmethod
    def _passthrough(answer: BackendAnswer) -> Response:
        return Response(answer.content, answer.status, media_type=answer.media_type)

    async def read_json(self, request: Request) -> tuple[dict[str, Any], bool] | Response:
        """The request body as a JSON object, and whether it is a large one (at least
        :data:`~agentsgym_gateway.jsonio.LARGE_BODY_BYTES`); or the error response to
        send instead."""
        try:
            raw = await read_bounded(request, self.max_body_bytes)
        except BodyTooLarge as exc:
            return _error(413, str(exc), "invalid_request_error")
        large = len(raw) >= LARGE_BODY_BYTES
        try:
            body = loads_request(raw)
        except ValueError as exc:
            return _error(400, f"the request body is not JSON ({exc})", "invalid_request_error")
        if not isinstance(body, dict):
            return _error(400, "the request body must be a JSON object", "invalid_request_error")
        return body, large

    def _endpoint_path(self, kind: str) -> str:
        return "/chat/completions" if kind == "chat" else "/completions"

    async def _send(
        self,
        session: GatewaySession,
        kind: str,
        body: dict[str, Any],
        *,
        stream: bool = False,
        large: bool = False,
    ) -> tuple[BackendRequest, BackendAnswer | BackendStream]:
        """The backend's answer to ``body`` (``stream``: its stream, when it streams;
        ``large``: a large body, written by ``json``); a backend that refuses
        ``return_token_ids`` is asked again without it."""
        send = self.backend.open_stream if stream else self.backend.post
        prepared = prepare(kind, body, token_ids=self.backend_token_ids, stream_backend=stream)
        path, context = self._endpoint_path(kind), session.call_context()
        try:
            answer = await send(path, dumps(prepared.body, large=large), context)
            refused = isinstance(answer, BackendAnswer) and answer.status == 400
            if refused and b"return_token_ids" in answer.content:
                self.backend_token_ids = False
                logger.warning("the backend refuses return_token_ids: calls are retokenized")
                prepared = prepare(kind, body, token_ids=False, stream_backend=stream)
                answer = await send(path, dumps(prepared.body, large=large), context)
        except Exception as exc:  # noqa: BLE001 - answered as a 502 and recorded
            logger.warning("the backend could not be reached: %s", type(exc).__name__)
            message = f"the gateway could not reach its backend: {type(exc).__name__}"
            answer = BackendAnswer(502, dumps({"error": {"message": message}}), "application/json")
        return prepared, answer

    def _complete(
        self, kind: str, body: dict[str, Any], answer: BackendAnswer
    ) -> tuple[BackendAnswer, list[CallRecord]]:
        """The answer the program gets and the call's records: one per choice (``n``),
        tool calls parsed where the gateway has a parser; an error is one failed record."""
        if answer.status != 200:
            return answer, [_failed(kind, answer.status, answer.content)]
        response = answer.json()
        wanted, got = requested_choices(body), len(response.get("choices") or [])
        if wanted > 1 and got < wanted:
            message = (
                f"the backend answered {got} choice(s) to a request for n={wanted}: it does "
                "not sample several choices per call; ask for n=1 and make one call per sample"
            )
            refusal = _error_body(message, "invalid_request_error")
            return BackendAnswer(400, dumps(refusal), "application/json"), [
                _failed(kind, 400, message.encode())
            ]
        records = [record_of(kind, body, response, i) for i in range(max(got, 1))]
        parser = self.tool_parser if kind == "chat" and body.get("tools") else None
        if parser and with_parsed_calls(response, parser):  # what vLLM's parser would send
            answer = BackendAnswer(200, answer.rewrite(response), answer.media_type)
            for record, choice in zip(records, response["choices"]):
                record.tool_calls = choice["message"].get("tool_calls") or None
        return answer, records

    async def call_backend(
        self,
        session: GatewaySession,
        kind: str,
        body: dict[str, Any],
        endpoint: Endpoint | None = None,
        *,
        large: bool = False,
    ) -> tuple[BackendRequest, BackendAnswer, list[CallRecord]]:
        """One recorded backend call, answered whole (``kind``: chat or completions;
        ``endpoint``: the program's, when it differs); a call whose session closed while
        it was in flight is answered HTTP 410, unrecorded."""
        prepared, sent = await self._send(session, kind, body, large=large)
        assert isinstance(sent, BackendAnswer)
        answer, records = self._complete(kind, body, sent)
        if endpoint is not None:
            for record in records:
                record.endpoint = endpoint
        if not session.add(*records):
            return prepared, _closed(), []
        return prepared, answer, records

    def _relays(self, kind: str, body: dict[str, Any]) -> bool:
        """Whether a streaming request is answered with the backend's own stream: when
        the backend streams, the gateway rewrites nothing (no tool parser at work) and
        one choice is asked for (several are checked against ``n`` whole)."""
        parsing = kind == "chat" and self.tool_parser is not None and bool(body.get("tools"))
        can_stream = callable(getattr(self.backend, "open_stream", None))
        return can_stream and not parsing and requested_choices(body) == 1

    async def relay(
        self, session: GatewaySession, kind: str, body: dict[str, Any], *, large: bool = False
    ) -> Response:
        """A streaming request answered with the backend's stream, as it comes, recorded
        when it ends (:mod:`agentsgym_gateway.relay`)."""
        prepared, sent = await self._send(session, kind, body, stream=True, large=large)
        if isinstance(sent, BackendAnswer):  # an error, or a backend that did not stream
            answer, records = self._complete(kind, body, sent)
            if not session.add(*records):
                answer = _closed()
            if answer.status != 200 or not prepared.added:
                return self._passthrough(answer)
            view = program_view(kind, answer.json(), prepared.added)
            return Response(answer.rewrite(view), 200, media_type=answer.media_type)
        stream, relay = sent, StreamRelay(kind, prepared.added)

        async def events() -> Any:
            # Recorded when the stream's end ([DONE]) is read, before the program reads
            # it: a program that closes its session once its stream ended finds the call.
            # A session closed before then takes no record: the program gets an error
            # event in place of the stream's end, never a whole answer left unrecorded.
            recorded = False
            failure: str | None = "the program stopped reading the stream before its end"
            try:
                async for piece in relay.forward(stream.chunks):
                    if relay.assembler.done and not recorded:
                        recorded = True
                        if not self._record_stream(session, kind, body, relay, None):
                            yield _closed_event()
                            return
                    yield piece
                failure = None
            except Exception as exc:  # noqa: BLE001 - the backend broke off: recorded
                logger.warning("the backend's stream broke off: %s", type(exc).__name__)
                failure = f"the backend's stream broke off: {type(exc).__name__}"
            finally:
                stream.close()
                if not recorded:
                    self._record_stream(session, kind, body, relay, failure)

        return StreamingResponse(events(), media_type=stream.media_type)

    @staticmethod
    def _record_stream(
        session: GatewaySession,
        kind: str,
        body: dict[str, Any],
        relay: StreamRelay,
        failure: str | None,
    ) -> bool:
        """Record the stream's call; False when its session had closed."""
        return session.add(*_streamed_records(kind, body, relay, failure))

    async def forward(self, request: Request, key: str | None, kind: str) -> Response:
        """A chat or completions call: read, sent on, recorded, answered."""
        session = self.session_of(request, key)
        if session is None:
            return self._unauthorised()
        read = await self.read_json(request)
        if isinstance(read, Response):
            return read
        body, large = read
        return _releasing(await self._answer(session, kind, body, large), large)

    async def _answer(
        self, session: GatewaySession, kind: str, body: dict[str, Any], large: bool
    ) -> Response:
        if body.get("stream") and self._relays(kind, body):
            return await self.relay(session, kind, body, large=large)
        prepared, answer, _ = await self.call_backend(session, kind, body, large=large)
        if answer.status != 200:
            return self._passthrough(answer)
        if not prepared.added and not prepared.stream:
            return self._passthrough(answer)  # the backend's bytes, untouched
        view = program_view(kind, answer.json(), prepared.added)
        if prepared.stream:
            events = chat_events if kind == "chat" else completion_events
            return StreamingResponse(
                events(view, prepared.include_usage), media_type="text/event-stream"
            )
        return Response(answer.rewrite(view), 200, media_type=answer.media_type)

    async def respond(self, request: Request, key: str | None) -> Response:
        """A Responses API call, served as one recorded chat completion."""
        session = self.session_of(request, key)
        if session is None:
            return self._unauthorised()
        read = await self.read_json(request)
        if isinstance(read, Response):
            return read
        body, large = read
        return _releasing(await self._respond(session, body, large), large)

    async def _respond(
        self, session: GatewaySession, body: dict[str, Any], large: bool
    ) -> Response:
        for field, message in UNSUPPORTED.items():
            if body.get(field):
                return _error(400, message, "invalid_request_error")
        chat_body = to_chat_body(body)
        prepared, answer, _ = await self.call_backend(
            session, "chat", chat_body, "responses", large=large
        )
        if answer.status != 200:
            return self._passthrough(answer)
        chat = program_view("chat", answer.json(), prepared.added)
        response = to_response(body, chat)
        if body.get("stream"):
            return StreamingResponse(response_events(response), media_type="text/event-stream")
        return Response(dumps(response), 200, media_type="application/json")
