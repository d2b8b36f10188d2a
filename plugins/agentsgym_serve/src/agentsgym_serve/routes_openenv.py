"""OpenEnv's protocol, as openenv-core 0.3.0 serves it (docs/serving.md).

* ``WS /ws``: one session per connection. The client sends ``{"type": "reset",
  "data": {...}}``, ``{"type": "step", "data": action}``, ``{"type": "state"}`` or
  ``{"type": "close"}``; the server answers ``{"type": "observation", "data":
  {"observation", "reward", "done"}}``, ``{"type": "state", "data": state}`` or
  ``{"type": "error", "data": {"message", "code"}}`` with openenv's codes
  (``INVALID_JSON``, ``UNKNOWN_TYPE``, ``VALIDATION_ERROR``, ``EXECUTION_ERROR``,
  ``CAPACITY_REACHED``, ``SESSION_ERROR``). A connection past ``--max-sessions`` is
  answered ``CAPACITY_REACHED`` and closed; an idle one is closed with the reason.
* ``POST /reset``, ``POST /step``: stateless, a fresh episode each. They share their
  paths with AgentGym's calls; a body with an ``id`` or ``env_idx`` is AgentGym's.
* ``GET /state``, ``/schema``, ``/metadata`` (``/health`` is the app's).
* ``POST /mcp`` and the ``/ws`` message ``{"type": "mcp", "data": <JSON-RPC>}``:
  OpenEnv's MCP endpoints, for a tool env's tools (:mod:`agentsgym_serve.openenv_mcp`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request, WebSocket
from openenv.core.env_server.mcp_types import JsonRpcErrorCode, WSMCPMessage
from openenv.core.env_server.serialization import deserialize_action
from openenv.core.env_server.types import (
    EnvironmentMetadata,
    ResetResponse,
    SchemaResponse,
    StepResponse,
    WSCloseMessage,
    WSErrorCode,
    WSResetMessage,
    WSStateMessage,
    WSStepMessage,
)
from pydantic import BaseModel, ValidationError
from starlette.responses import Response
from starlette.websockets import WebSocketState

from agentsgym_serve.errors import ServeError, ServerFull
from agentsgym_serve.openenv_mcp import McpService, rpc_error
from agentsgym_serve.openenv_models import (
    AgentsgymAction,
    AgentsgymObservation,
    AgentsgymState,
    TextArenaObservation,
)
from agentsgym_serve.openenv_service import OpenEnvReset, OpenEnvService, OpenEnvStep
from agentsgym_serve.responses import SafeJSONResponse, clip_echoes, json_text
from agentsgym_serve.schemas import (
    AgentGymObservation,
    AgentGymReset,
    AgentGymStep,
    error_responses,
)
from agentsgym_serve.service import EnvService
from agentsgym_serve.sessions import Session

logger = logging.getLogger("agentsgym_serve")

TAG = "OpenEnv protocol"
router = APIRouter(tags=[TAG])
MESSAGE_TYPES = "reset, step, state, close and mcp"
CLOSE_GOING_AWAY = 1001
HINTS = {
    "step": 'a step\'s data is an action: {"message": str, "token_ids"?: [int], '
    '"truncated"?: bool, "tool_calls"?: [{"id", "type": "function", "function": {"name", '
    '"arguments"}}]}',
    "reset": "a reset's data takes seed, episode_id, task_data and data_idx (all optional)",
    "mcp": 'an mcp message\'s data is a JSON-RPC 2.0 request {"jsonrpc": "2.0", "method", '
    '"params"?, "id"?}',
    "": 'a message is {"type": "reset"|"step"|"state"|"close"|"mcp", "data": {...}}',
}
CLOSE_TRY_AGAIN_LATER = 1013
FIRST_MESSAGE_WAIT_SECONDS = 10.0


def _openenv(request: Request | WebSocket) -> OpenEnvService:
    return request.app.state.openenv  # type: ignore[no-any-return]


def _mcp(request: Request | WebSocket) -> McpService:
    return request.app.state.mcp  # type: ignore[no-any-return]


def _service(request: Request) -> EnvService:
    return request.app.state.service  # type: ignore[no-any-return]


def _one_of(*models: type[BaseModel]) -> dict[str, Any]:
    return {"anyOf": [m.model_json_schema() for m in models]}


def _body_doc(*models: type[BaseModel]) -> dict[str, Any]:
    schema = _one_of(*models)
    # not required: openenv's /reset takes no body at all
    return {"requestBody": {"required": False, "content": {"application/json": {"schema": schema}}}}


def _reply_doc(*models: type[BaseModel]) -> dict[int | str, dict[str, Any]]:
    ok = {200: {"content": {"application/json": {"schema": _one_of(*models)}}}}
    return {**ok, **error_responses(400, 403, 404, 409, 410, 422, 503)}


async def _json_body(request: Request) -> Any:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        problem = f"invalid JSON: {_json_problem(exc)}"
        raise _Invalid([{"loc": ["body"], "msg": problem, "type": "json_invalid"}]) from None


def _json_problem(exc: Exception) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply to read"
    return str(exc)


class _Invalid(Exception):
    def __init__(self, errors: list[Any]) -> None:
        self.errors = errors


def _invalid(errors: list[Any]) -> Response:
    return SafeJSONResponse(clip_echoes({"detail": errors}), status_code=422)


def _in_body(exc: ValidationError) -> list[Any]:
    """The errors as FastAPI words a body's: each ``loc`` starts with ``body``."""
    return [{**e, "loc": ["body", *e["loc"]]} for e in exc.errors(include_url=False)]


def _not_an_object(body: Any) -> Response:
    return _invalid(
        [
            {
                "loc": ["body"],
                "msg": "the body must be a JSON object",
                "type": "dict_type",
                "input": body,
            }
        ]
    )


@router.post(
    "/reset",
    openapi_extra=_body_doc(AgentGymReset, OpenEnvReset),
    responses=_reply_doc(AgentGymObservation, ResetResponse),
    summary="Reset: AgentGym's (a body with an id) or OpenEnv's (a fresh episode)",
)
async def reset(request: Request) -> Response:
    return await _by_protocol(
        request,
        lambda body: _service(request).agentgym_reset(AgentGymReset.model_validate(body)),
        lambda body: _openenv(request).stateless(OpenEnvReset.read(body)),
    )


@router.post(
    "/step",
    openapi_extra=_body_doc(AgentGymStep, OpenEnvStep),
    responses=_reply_doc(AgentGymObservation, StepResponse),
    summary="Step: AgentGym's (a body with an id) or OpenEnv's (one action on a fresh episode)",
)
async def step(request: Request) -> Response:
    def openenv_step(body: dict[str, Any]) -> Awaitable[Any]:
        params = OpenEnvStep.read(body)
        action = deserialize_action(params.action, AgentsgymAction)
        fields = set(OpenEnvReset.model_fields)
        task = OpenEnvReset.read(params.model_dump(include=fields))
        return _openenv(request).stateless(task, action)

    return await _by_protocol(
        request,
        lambda body: _service(request).agentgym_step(AgentGymStep.model_validate(body)),
        openenv_step,
    )


async def _by_protocol(
    request: Request,
    agentgym: Callable[[dict[str, Any]], Awaitable[Any]],
    openenv: Callable[[dict[str, Any]], Awaitable[Any]],
) -> Response:
    """AgentGym's call for a body with an ``id`` or ``env_idx``, else OpenEnv's; a body that is not JSON,
    not an object or not valid for the call is answered 422, as FastAPI answers."""
    try:
        body = await _json_body(request)
        if not isinstance(body, dict):
            return _not_an_object(body)
        is_agentgym = "id" in body or "env_idx" in body
        call = agentgym(body) if is_agentgym else openenv(body)
    except _Invalid as exc:
        return _invalid(exc.errors)
    except ValidationError as exc:
        return _invalid(_in_body(exc))
    return SafeJSONResponse(await call)


@router.get("/state", response_model=AgentsgymState, summary="The state of a fresh env")
async def state(request: Request) -> Response:
    return SafeJSONResponse(_openenv(request).state(None))


@router.get(
    "/schema", response_model=SchemaResponse, summary="Action, observation and state schemas"
)
async def schema(request: Request) -> Response:
    textarena = _openenv(request).observation == "textarena"
    observation = TextArenaObservation if textarena else AgentsgymObservation
    return SafeJSONResponse(
        {
            "action": AgentsgymAction.model_json_schema(),
            "observation": observation.model_json_schema(),
            "state": AgentsgymState.model_json_schema(),
        }
    )


@router.get("/metadata", response_model=EnvironmentMetadata, summary="What env this is")
async def metadata(request: Request) -> Response:
    spec = _service(request).host.spec
    return SafeJSONResponse(
        {
            "name": spec.id,
            "description": spec.description or f"{spec.id}, served by agentsgym",
            "readme_content": None,
            "version": spec.version,
            "author": spec.distribution,
            "documentation_url": None,
        }
    )


@router.post(
    "/mcp",
    summary="MCP (JSON-RPC 2.0): tools/list, tools/call, openenv/session/create and close",
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "a JSON-RPC 2.0 request {jsonrpc, method, params?, id?}; any "
            "other body is answered with a JSON-RPC error (status 200), as openenv-core does",
            # any JSON: nothing is refused with a 4xx
            "content": {"application/json": {"schema": {}}},
        }
    },
    responses={200: {"content": {"application/json": {"schema": {"type": "object"}}}}},
)
async def mcp(request: Request) -> Response:
    """OpenEnv's MCP endpoint: a JSON-RPC response, always with status 200 (errors are
    JSON-RPC errors), as openenv-core answers."""
    try:
        body = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        return SafeJSONResponse(
            rpc_error(JsonRpcErrorCode.PARSE_ERROR, f"Parse error: {_json_problem(exc)}")
        )
    return SafeJSONResponse(await _mcp(request).rpc(body))


# ---------------------------------------------------------------------- WebSocket
def _error(message: str, code: WSErrorCode, **extra: Any) -> dict[str, Any]:
    return {"type": "error", "data": {"message": message, "code": code.value, **extra}}


async def _answer(
    openenv: OpenEnvService, mcp: McpService, session: Session, text: str
) -> dict[str, Any] | None:
    """The reply to one message (None: the client closes the session)."""
    try:
        message = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        # RecursionError: nested deeper than the parser goes (100,000 `[`), a bad message too
        return _error(
            f"Invalid JSON: {_json_problem(exc)}; send one JSON object per message, "
            '{"type": "reset"|"step"|"state"|"close", "data": {...}}',
            WSErrorCode.INVALID_JSON,
        )
    if not isinstance(message, dict):
        return _error(
            'a message is a JSON object {"type": ..., "data": ...}', WSErrorCode.VALIDATION_ERROR
        )
    kind = message.get("type", "")
    try:
        if kind == "step":
            data = WSStepMessage.model_validate(message).data
            if mcp.is_mcp_action(data):  # MCPToolClient's list_tools / call_tool
                return {"type": "observation", "data": await mcp.step(session, data)}
            payload = await openenv.step(session, deserialize_action(data, AgentsgymAction))
            return {"type": "observation", "data": payload}
        if kind == "reset":
            data = WSResetMessage.model_validate(message).data
            payload = await openenv.reset(session, OpenEnvReset.read(data))
            return {"type": "observation", "data": payload}
        if kind == "mcp":
            data = WSMCPMessage.model_validate(message).data
            return {"type": "mcp", "data": await mcp.rpc(data, session)}
        if kind == "state":
            WSStateMessage.model_validate(message)
            return {"type": "state", "data": openenv.state(session)}
        if kind == "close":
            WSCloseMessage.model_validate(message)
            return None
    except ValidationError as exc:
        return _error(
            f"Invalid message: {exc}; {HINTS.get(kind, HINTS[''])}",
            WSErrorCode.VALIDATION_ERROR,
            errors=exc.errors(include_url=False),
        )
    except ServeError as exc:
        return _error(exc.detail, WSErrorCode.EXECUTION_ERROR, error=exc.code)
    return _error(
        f"Unknown message type: {kind!r}; this server takes {MESSAGE_TYPES}",
        WSErrorCode.UNKNOWN_TYPE,
    )


async def _send(websocket: WebSocket, reply: dict[str, Any]) -> None:
    await websocket.send_text(json_text(reply))


@router.websocket("/ws")
async def ws(websocket: WebSocket) -> None:
    openenv = _openenv(websocket)
    await websocket.accept()
    try:
        session = openenv.open()
    except ServerFull as exc:
        await _first_message(websocket)
        await _send(
            websocket,
            _error(
                exc.detail,
                WSErrorCode.CAPACITY_REACHED,
                active_sessions=exc.extra.get("sessions"),
                max_sessions=exc.extra.get("max_sessions"),
            ),
        )
        await websocket.close(code=CLOSE_TRY_AGAIN_LATER, reason="server at capacity")
        return
    except ServeError as exc:
        await _first_message(websocket)
        await _send(websocket, _error(exc.detail, WSErrorCode.SESSION_ERROR, error=exc.code))
        await websocket.close(code=CLOSE_TRY_AGAIN_LATER)
        return
    # The connection's loop is a task of its own: each of its awaits (two or three a
    # step) then resumes a handful of frames, not the twenty of the ASGI stack above
    # this handler (middlewares, routers, exception wrappers). Cancelling the handler
    # cancels the task, and waits for its cleanup.
    await asyncio.ensure_future(_serve_session(websocket, openenv, _mcp(websocket), session))


async def _serve_session(
    websocket: WebSocket, openenv: OpenEnvService, mcp: McpService, session: Session
) -> None:
    """Answer the connection's messages until it ends, then close its session."""
    ending = "the client disconnected"

    def closed_by_server(reason: str) -> None:
        # reaped (idle) or the server stops: tell the client why, then close
        asyncio.ensure_future(_close_for(websocket, f"session closed: {reason}"))

    session.on_close = closed_by_server
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
            text = message.get("text")
            if text is None:
                try:
                    text = (message.get("bytes") or b"").decode("utf-8")
                except UnicodeDecodeError:
                    text = ""
            reply = await _answer(openenv, mcp, session, text)
            if reply is None:
                ending = "closed by the client"
                break
            await _send(websocket, reply)
    except Exception as exc:  # noqa: BLE001 (a broken connection ends its session)
        ending = f"the connection failed: {type(exc).__name__}: {exc}"
    finally:
        session.on_close = None
        await openenv.close(session, ending)
        if websocket.application_state != WebSocketState.DISCONNECTED:
            with contextlib.suppress(Exception):
                await websocket.close()


async def _first_message(websocket: WebSocket) -> None:
    """Wait (a little) for the client's first message, so that a refusal is read as its
    reply: sent at once, it races the client's send against the close, and is lost."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(websocket.receive(), FIRST_MESSAGE_WAIT_SECONDS)


async def _close_for(websocket: WebSocket, reason: str) -> None:
    with contextlib.suppress(Exception):
        await _send(
            websocket,
            _error(reason + "; reconnect to start a new session", WSErrorCode.SESSION_ERROR),
        )
        # a close reason is at most 123 bytes
        await websocket.close(
            code=CLOSE_GOING_AWAY, reason=reason.encode()[:120].decode(errors="ignore")
        )
