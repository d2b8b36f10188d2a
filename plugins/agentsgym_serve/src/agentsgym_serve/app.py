"""The env server as an ASGI app: ``create_app(env_id, ...)`` (FastAPI, the extra
``agentsgym-serve[server]``).

One app serves one env id (any registered id, or an allowed ``module:Class`` path)
over AgentGym's protocol, agentsgym's own ``/agentsgym/v1`` endpoints and (with
openenv-core installed) OpenEnv's protocol (``/ws``, ...), with an
OpenAPI schema at ``/openapi.json``, a health check at ``/health`` (its load at
``/agentsgym/v1/health``), an access log,
a limit on request bodies (:class:`BodyLimitMiddleware`) and a background task that
reaps idle sessions. Run it with ``agentsgym serve``, or with any ASGI server::

    from agentsgym_serve import create_app
    app = create_app("agentsgym/GuessTheNumber-v0", max_sessions=256)
    # uvicorn.run(app, host="127.0.0.1", port=8000)
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import logging
import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from starlette.responses import Response

from agentsgym.errors import MissingPluginError

try:
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
except ImportError as exc:
    raise MissingPluginError(
        "the env server (agentsgym serve, create_app) needs FastAPI: pip install "
        "'agentsgym-serve[server]' (from a clone: pip install './plugins/agentsgym_serve[server]')"
    ) from exc

from agentsgym_serve.agentgym_shapes import CREATE_SHAPES, check_action_format
from agentsgym_serve.errors import BodyTooLarge, ServeError
from agentsgym_serve.host import DEFAULT_MAX_ENV_CONFIGS, DEFAULT_THREADS, EnvHost
from agentsgym_serve.logs import AccessLogMiddleware
from agentsgym_serve.responses import SafeJSONResponse, clip_echoes
from agentsgym_serve.role_agents import RoleAgents, build_role_agents, with_role_defaults
from agentsgym_serve.routes_agentgym import reset_step_router as agentgym_reset_step_router
from agentsgym_serve.routes_agentgym import router as agentgym_router
from agentsgym_serve.routes_v1 import router as v1_router
from agentsgym_serve.schemas import PROTOCOL, ErrorReply, Health
from agentsgym_serve.service import EnvService
from agentsgym_serve.sessions import DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_SESSIONS, SessionTable

logger = logging.getLogger("agentsgym_serve")

HEALTHY = {"status": "healthy"}
"""``GET /health``'s body: openenv-core's ``HealthResponse``, which forbids other fields."""

DEFAULT_MAX_BODY_BYTES = 1 << 20
"""1 MiB: a step's action with its token ids, or a large task_data, with room to spare."""

DESCRIPTION = """\
An agentsgym env server. AgentGym's protocol (`/create`, `/reset`, `/step`,
`/observation`, `/close`) for AgentGym's clients, and agentsgym's own `/agentsgym/v1`
endpoints (full task_data, chat messages, reward terms, retry-safe counters) for
`agentsgym.RemoteEnv`, and OpenEnv's protocol (`/ws` sessions; stateless `/reset`,
`/step`; `/state`, `/schema`, `/metadata`, `/health`; `/mcp` for a tool env's tools)
for OpenEnv's clients. See
docs/serving.md in the agentsgym repository.
"""


def _version() -> str:
    try:
        return importlib.metadata.version("agentsgym")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def create_app(
    env_id: str,
    env_config: dict[str, Any] | None = None,
    *,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    max_env_configs: int = DEFAULT_MAX_ENV_CONFIGS,
    lock_config: bool = False,
    allow_class_paths: bool | Sequence[str] | None = None,
    agentgym_split: str = "train",
    threads: int = DEFAULT_THREADS,
    plugins: Sequence[object] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    openenv: bool | None = None,
    observation: str = "agentsgym",
    agentgym_create: str = "object",
    agentgym_action_format: str | None = None,
    agents: Mapping[str | None, Any] | None = None,
    agent_options: Mapping[str, Any] | None = None,
    client_role: str | None = None,
    role_default_agents: bool = False,
) -> FastAPI:
    """The server of one env (see the module docstring).

    :param env_id: a registered id, or a ``module:Class`` path when allowed.
    :param env_config: the served config, over the id's registered defaults.
    :param max_sessions: live sessions at most; past it, creates get a 503.
    :param idle_timeout: seconds after which an unused session is closed.
    :param max_env_configs: distinct client configs (env instances) held at once.
    :param lock_config: refuse client env_configs that differ from the served one.
    :param agentgym_split: the dataset split AgentGym's ``data_idx`` indexes.
    :param threads: worker threads for plain env hooks.
    :param plugins: extra plugins in every env instance's hook relay.
    :param max_body_bytes: the largest request body taken, on every route; a larger
        one is answered 413 ``body_too_large`` before it is read whole.
    :param openenv: serve OpenEnv's protocol too (``/ws``, ``/reset``, ``/step``,
        ``/state``, ``/schema``, ``/metadata``); ``None``: when openenv-core is
        installed (``agentsgym-serve[openenv]``), ``True`` requires it.
    :param observation: the shape of OpenEnv's observations: ``"agentsgym"`` (chat
        messages, reward terms) or ``"textarena"`` (the shape of OpenEnv's text envs:
        a cumulative transcript in ``messages[0].content``, which TRL's OpenEnv
        examples read); see :mod:`agentsgym_serve.openenv_models`.
    :param agentgym_create: AgentGym's ``/create`` reply: ``"object"`` (``{"id",
        "observation", ...}``) or ``"integer"`` (the bare id, which WebShop's, SQLGym's
        and the tool envs' clients read); see :mod:`agentsgym_serve.agentgym_shapes`.
    :param agentgym_action_format: AgentGym actions that are only letters, digits,
        commas and spaces are put into it (``"[{action}]"``); default: the env's
        ``agentgym_action_format``.
    :param agents: an env with roles: the server's agents, by role (an agent, or a
        registered agent's name), that play the roles a client does not; the key
        ``None`` plays every such role without its own. Required for an env with roles
        (see :mod:`agentsgym_serve.role_agents`); refused for one without.
    :param agent_options: options of the agents given by name, as ``--agent-option``
        writes them (``key`` for the agent of key ``None``, ``ROLE.key`` for a role's).
    :param client_role: the role a session plays unless it names one (default: the
        env's first trainable role the server can serve); OpenEnv's and AgentGym's
        clients cannot name one except through OpenEnv's reset ``role``.
    :param role_default_agents: a role given no agent plays with its
        ``Role.default_agent`` unless ``agents`` has one for every role (key ``None``),
        as the command line chooses agents (``agentsgym serve`` passes True).
    """
    if agentgym_create not in CREATE_SHAPES:
        raise ValueError(f"agentgym_create must be object or integer, got {agentgym_create!r}")
    if observation not in ("agentsgym", "textarena"):
        raise ValueError(f"observation must be agentsgym or textarena, got {observation!r}")
    if agentgym_split not in ("train", "eval"):
        raise ValueError(f"agentgym_split must be train or eval, got {agentgym_split!r}")
    if max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be at least 1, got {max_body_bytes}")
    host = EnvHost(
        env_id,
        env_config,
        allow_class_paths=allow_class_paths,
        lock_config=lock_config,
        max_env_configs=max_env_configs,
        threads=threads,
        plugins=plugins,
    )
    try:
        env = host.default.env
        chosen = with_role_defaults(agents or {}, env) if role_default_agents else agents
        roles = env.role_names
        built = build_role_agents(chosen or {}, agent_options or {}, roles)
        role_agents = RoleAgents.for_env(env, host.spec.id, built, client_role)
    except BaseException:
        host.close()
        raise
    table = SessionTable(max_sessions, idle_timeout)
    service = EnvService(
        host,
        table,
        agentgym_split=agentgym_split,
        agentgym_action_format=check_action_format(agentgym_action_format),
        role_agents=role_agents,
    )
    instance = secrets.token_hex(8)
    try:
        config_schema = host.env_class.config_class.model_json_schema()
    except Exception:  # noqa: BLE001 (a config type pydantic cannot describe: serve anyway)
        config_schema = {}
    spec = host.spec

    def env_info() -> dict[str, Any]:
        return {
            "protocol": PROTOCOL,
            "env_id": spec.id,
            "description": spec.description,
            "distribution": spec.distribution,
            "version": spec.version,
            "default_agent": spec.default_agent,
            "env_config": host.default.public_config,
            "config_schema": config_schema,
            "config_locked": lock_config,
            "datasets": host.splits(),
            "agentgym_split": agentgym_split,
            "max_sessions": table.max_sessions,
            "idle_timeout_seconds": table.idle_timeout,
            "server_instance": instance,
            "has_tools": host.has_tools,
            **(role_agents.info() if role_agents is not None else {}),
        }

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        reaper = asyncio.ensure_future(service.reaper())
        logger.info(
            "serving",
            extra={"fields": {"event": "serving", "env_id": spec.id, "instance": instance}},
        )
        try:
            yield
        finally:
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper
            await service.shutdown()

    app = FastAPI(
        title=f"agentsgym env server: {spec.id}",
        version=_version(),
        description=DESCRIPTION,
        lifespan=lifespan,
        responses={413: {"model": ErrorReply, "description": "The request body is too large"}},
    )
    app.state.service = service
    app.state.agentgym_create = agentgym_create
    app.state.env_info = env_info
    app.add_exception_handler(ServeError, _serve_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    # Added first, so inside the access log: a refused body is logged with its 413.
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=max_body_bytes)
    app.add_middleware(AccessLogMiddleware)
    app.include_router(v1_router)
    app.include_router(agentgym_router)
    openenv_router = _openenv_router(openenv)
    if openenv_router is None:
        app.include_router(agentgym_reset_step_router)
    else:
        from agentsgym_serve.openenv_mcp import McpService
        from agentsgym_serve.openenv_service import OpenEnvService

        app.state.openenv = OpenEnvService(service, observation=observation)
        app.state.mcp = McpService(app.state.openenv)
        app.include_router(openenv_router)

    @app.get("/", include_in_schema=False)
    async def hello() -> Response:
        return SafeJSONResponse(f"This is environment {spec.id} (agentsgym env server).")

    def load() -> dict[str, Any]:
        return {
            "status": "healthy",
            "env_id": spec.id,
            "sessions": len(table),
            "max_sessions": table.max_sessions,
            "server_instance": instance,
            "has_tools": host.has_tools,
        }

    app.state.load = load

    @app.get(
        "/health",
        response_model=Health,
        tags=["server"],
        summary="Liveness, as OpenEnv's HealthResponse (the load: /agentsgym/v1/health)",
    )
    async def health() -> Response:
        return SafeJSONResponse(HEALTHY)

    return app


def _openenv_router(wanted: bool | None) -> Any:
    """OpenEnv's routes, if wanted (``None``: if openenv-core is installed)."""
    if wanted is False:
        return None
    try:
        from agentsgym_serve.routes_openenv import router
    except ImportError as exc:
        if wanted:
            raise ImportError(
                "serving OpenEnv's protocol needs openenv-core: "
                "pip install -e './plugins/agentsgym_serve[openenv]' in a clone"
            ) from exc
        logger.info(
            "openenv-core is not installed: OpenEnv's protocol is not served "
            "(pip install -e './plugins/agentsgym_serve[openenv]' in a clone)",
            extra={"fields": {"event": "openenv_off"}},
        )
        return None
    return router


async def _serve_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ServeError)
    if exc.status >= 500:
        logger.warning(exc.detail, extra={"fields": {"event": exc.code, "path": request.url.path}})
    return SafeJSONResponse(clip_echoes(exc.body()), status_code=exc.status, headers=exc.headers)


async def _validation_error(request: Request, exc: Exception) -> Response:
    # FastAPI's own handler writes non-ASCII JSON, which fails on a lone surrogate or
    # undecodable bytes in the echoed input; this one writes the same body safely.
    assert isinstance(exc, RequestValidationError)
    return SafeJSONResponse(clip_echoes({"detail": list(exc.errors())}), status_code=422)


class _Overflow(Exception):
    """Raised into the app by a read that took the body past the limit."""


class BodyLimitMiddleware:
    """A pure ASGI middleware that refuses request bodies over ``max_body_bytes``.

    A declared ``Content-Length`` over the limit is answered at once, unread. Any
    other body (chunked, or one that would run past what it declared) is counted as
    the app reads it: the read that crosses the limit raises in the app, and the
    client gets the 413 instead of whatever the app made of that failure (FastAPI
    answers a failed body read with a 400). At most the limit is ever read, and a
    route that never reads its body never holds it. The 413 closes the connection,
    so that the server does not drain the rest of an oversized upload.
    """

    def __init__(self, app: Any, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await self._refuse(scope, receive, send, declared)
            return
        received = 0
        over = started = False

        async def counted_receive() -> dict[str, Any]:
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    over = True
                    raise _Overflow
            return message

        async def guarded_send(message: dict[str, Any]) -> None:
            nonlocal started
            if over and not started:
                return  # the app's answer to the failed read: the 413 replaces it
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, guarded_send)
        except Exception:
            if not over or started:
                raise
            # whatever the app raised is the overflow's doing: answer the overflow
        if over and not started:
            await self._refuse(scope, receive, send, None)

    async def _refuse(self, scope: Any, receive: Any, send: Any, declared: int | None) -> None:
        size = f"of {declared} bytes " if declared is not None else ""
        error = BodyTooLarge(
            f"the request body {size}is over this server's limit of {self.max_body_bytes} "
            "bytes (agentsgym serve --max-body-bytes); send a smaller one",
            max_body_bytes=self.max_body_bytes,
        )
        response = SafeJSONResponse(
            error.body(), status_code=error.status, headers={"connection": "close"}
        )
        await response(scope, receive, send)


def _content_length(scope: dict[str, Any]) -> int | None:
    for name, value in scope.get("headers", ()):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the server refuses a malformed length before the app sees it
    return None
