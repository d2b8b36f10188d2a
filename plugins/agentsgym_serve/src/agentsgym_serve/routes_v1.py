"""agentsgym's own endpoints, under ``/agentsgym/v1`` (docs/serving.md).

What AgentGym's protocol drops: a full ``task_data`` at reset, chat messages (system
prompts included), reward terms and ``info`` per step, ``finish_episode``, the env's
id, config schema and datasets, and counters that make every call safe to retry.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response

from agentsgym_serve.responses import SafeJSONResponse
from agentsgym_serve.schemas import (
    V1_PREFIX,
    Closed,
    ConfigReply,
    ConfigRequest,
    Created,
    CreateRequest,
    DatasetReply,
    DatasetRequest,
    EnvInfo,
    FinishReply,
    FinishRequest,
    Load,
    ResetReply,
    ResetRequest,
    SessionState,
    StepReply,
    StepRequest,
    TokenRequest,
    ToolsReply,
    ToolsRequest,
    error_responses,
)
from agentsgym_serve.service import EnvService

router = APIRouter(prefix=V1_PREFIX, tags=["agentsgym/v1"])
SESSION_ERRORS = (400, 403, 404, 409, 410)


def _service(request: Request) -> EnvService:
    return request.app.state.service  # type: ignore[no-any-return]


# The hot path first: the router tries routes in order.
@router.post(
    "/sessions/{session_id}/step",
    response_model=StepReply,
    responses=error_responses(*SESSION_ERRORS),
    summary="Apply the agent's action (a retry of the last step gets the same reply)",
)
async def step(body: StepRequest, request: Request, session_id: int = Path(...)) -> Response:
    return SafeJSONResponse(await _service(request).step(session_id, body))


@router.post(
    "/sessions",
    response_model=Created,
    responses=error_responses(400, 403, 409, 410, 422, 503),
    summary="Create a session (and start its first episode when task_data is given)",
)
async def create(body: CreateRequest, request: Request) -> Response:
    return SafeJSONResponse(await _service(request).create(body))


@router.post(
    "/sessions/{session_id}/finish",
    response_model=FinishReply,
    responses=error_responses(*SESSION_ERRORS),
    summary="End the episode (finish_episode) and, by default, close the session",
)
async def finish(body: FinishRequest, request: Request, session_id: int = Path(...)) -> Response:
    return SafeJSONResponse(await _service(request).finish(session_id, body))


@router.post(
    "/sessions/{session_id}/reset",
    response_model=ResetReply,
    responses=error_responses(*SESSION_ERRORS),
    summary="Start the next episode with a task",
)
async def reset(body: ResetRequest, request: Request, session_id: int = Path(...)) -> Response:
    return SafeJSONResponse(await _service(request).reset(session_id, body))


@router.post(
    "/sessions/{session_id}/close",
    response_model=Closed,
    responses=error_responses(403, 404, 410),
    summary="Close a session",
)
async def close(body: TokenRequest, request: Request, session_id: int = Path(...)) -> Response:
    return SafeJSONResponse(await _service(request).close(session_id, body.token))


@router.get(
    "/sessions/{session_id}",
    response_model=SessionState,
    responses=error_responses(403, 404, 410),
    summary="The current episode: conversation, counters",
)
async def session_state(
    request: Request, session_id: int = Path(...), token: str = Query(..., max_length=256)
) -> Response:
    return SafeJSONResponse(_service(request).session_state(session_id, token))


@router.get("/env", response_model=EnvInfo, summary="What this server serves")
async def env_info(request: Request) -> Response:
    return SafeJSONResponse(request.app.state.env_info())


@router.get("/health", response_model=Load, summary="Liveness and the server's load")
async def health(request: Request) -> Response:
    return SafeJSONResponse(request.app.state.load())


@router.post(
    "/env/config",
    response_model=ConfigReply,
    responses=error_responses(400, 403, 422, 503),
    summary="Validate an env_config: the effective config, or 422 naming the field",
)
async def env_config(body: ConfigRequest, request: Request) -> Response:
    return SafeJSONResponse(await _service(request).env_config(body))


@router.post(
    "/tools",
    response_model=ToolsReply,
    responses=error_responses(400, 403, 404, 422, 503),
    summary="The tool schemas of a task's episodes (null: none), before an episode starts",
)
async def tools(body: ToolsRequest, request: Request) -> Response:
    return SafeJSONResponse(await _service(request).tools(body))


@router.post(
    "/datasets/{split}",
    response_model=DatasetReply,
    responses=error_responses(400, 403, 404, 422, 503),
    summary="The task_data of a dataset split, a page at a time",
)
async def dataset(
    body: DatasetRequest, request: Request, split: Literal["train", "eval"] = Path(...)
) -> Response:
    return SafeJSONResponse(await _service(request).dataset(split, body))
