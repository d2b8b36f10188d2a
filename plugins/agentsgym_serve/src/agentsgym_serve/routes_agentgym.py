"""AgentGym's protocol, as its env servers speak it (docs/serving.md).

``POST /create`` -> ``{"id", "observation"}`` (task 0 started), or the bare id with
``--agentgym-create integer``; ``POST /reset {"id", "data_idx"}`` and ``POST /step
{"id", "action"}`` -> ``{"observation", "reward", "score", "done"}`` (``score``: the
episode's rewards so far, which AgentGym's BabyAI client reads) and the extras of
:mod:`agentsgym_serve.agentgym_shapes`; ``GET /observation?id=`` -> ``{"observation"}``
(``?env_idx=`` -> the bare string, as WebShop's server answers); ``POST /close {"id"}``
-> ``{"closed"}``. Every body may name its instance ``env_idx`` instead of ``id``.
``data_idx`` indexes the served env's dataset split (``--split``, train by default).
Errors are JSON ``{"error", "detail"}`` with a 4xx status (AgentGym's servers answer
200 with an ``error`` field, or crash with a 500; clients of either check for both).
"""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from agentsgym_serve.errors import ServeError
from agentsgym_serve.responses import SafeJSONResponse
from agentsgym_serve.schemas import (
    AgentGymClose,
    AgentGymClosed,
    AgentGymCreated,
    AgentGymObservation,
    AgentGymObservationOnly,
    AgentGymReset,
    AgentGymStep,
    error_responses,
)
from agentsgym_serve.service import EnvService

TAG = "AgentGym protocol"
router = APIRouter(tags=[TAG])
reset_step_router = APIRouter(tags=[TAG])
"""``/reset`` and ``/step``: served by OpenEnv's routes instead when those are on (they
share the paths and tell the protocols apart by the body's ``id``)."""


class MissingInstance(ServeError):
    status = 422
    code = "missing_instance"


def _service(request: Request) -> EnvService:
    return request.app.state.service  # type: ignore[no-any-return]


@router.post(
    "/create",
    response_model=AgentGymCreated,
    responses=error_responses(503),
    summary="Create an env instance",
)
async def create(request: Request) -> Response:
    created = await _service(request).agentgym_create()
    if getattr(request.app.state, "agentgym_create", "object") == "integer":
        return SafeJSONResponse(created["id"])  # WebShop's, SQLGym's, the tool envs' shape
    return SafeJSONResponse(created)


@reset_step_router.post(
    "/reset",
    response_model=AgentGymObservation,
    responses=error_responses(400, 403, 404, 410),
    summary="Start an episode of the task at data_idx",
)
async def reset(body: AgentGymReset, request: Request) -> Response:
    return SafeJSONResponse(await _service(request).agentgym_reset(body))


@reset_step_router.post(
    "/step",
    response_model=AgentGymObservation,
    responses=error_responses(400, 403, 404, 409, 410),
    summary="Apply an action",
)
async def step(body: AgentGymStep, request: Request) -> Response:
    return SafeJSONResponse(await _service(request).agentgym_step(body))


@router.get(
    "/observation",
    response_model=AgentGymObservationOnly | str,
    responses=error_responses(403, 404, 409, 410, 422),
    summary="The last observation (a bare string when asked by env_idx)",
)
async def observation(
    request: Request, id: int | None = Query(None), env_idx: int | None = Query(None)
) -> Response:
    if env_idx is not None:  # WebShop's client: its server answers the bare string
        return SafeJSONResponse(_service(request).agentgym_observation(env_idx)["observation"])
    if id is None:
        raise MissingInstance("name the instance: /observation?id=N (or ?env_idx=N)")
    return SafeJSONResponse(_service(request).agentgym_observation(id))


@router.post(
    "/close",
    response_model=AgentGymClosed,
    responses=error_responses(403),
    summary="Close an env instance",
)
async def close(body: AgentGymClose, request: Request) -> Response:
    return SafeJSONResponse(await _service(request).agentgym_close(body.instance))
