"""OpenEnv's MCP endpoints for a served tool env, as openenv-core 0.3.0 serves them.

A tool env's tools (``env.episode_tools(task_data)``: the toolbox of the session's
episode, so per-task tools are that task's) are offered three ways, each the wire
format of openenv-core's server, so that openenv's ``MCPToolClient`` (its EchoEnv
client) and ``openenv validate --url`` work unchanged:

* **step actions over** ``/ws``: ``{"type": "list_tools"}`` is answered with the
  observation ``{"tools": [{"name", "description", "input_schema"}]}`` (reward null,
  done false: a listing is no turn); ``{"type": "call_tool", "tool_name",
  "arguments"}`` with the step's observation plus ``tool_name``, ``result`` (openenv's
  form of a tool result: ``{"content": [{"type": "text", "text"}], "data", "is_error",
  ...}``) and ``error`` (``{"error_type", "message"}`` when the tool failed or is
  unknown). This is what ``MCPToolClient.list_tools()`` and ``call_tool()`` send;
* **JSON-RPC 2.0 at** ``POST /mcp``: ``tools/list``, ``tools/call`` (``{"name",
  "arguments"}``), and openenv's session methods ``openenv/session/create`` and
  ``openenv/session/close``. A call with a ``session_id`` (from ``create``) plays that
  session's episode; without one it plays a fresh episode, closed afterwards (its
  other params pick the task, as a reset's data does). Errors are JSON-RPC errors with
  openenv's codes, always with HTTP status 200;
* **the WebSocket message** ``{"type": "mcp", "data": <JSON-RPC request>}`` on ``/ws``:
  the same methods, on the connection's session, answered ``{"type": "mcp", "data":
  <JSON-RPC response>}``.

**A tool call is a tool turn of the session's episode**: the call goes through the
episode's toolbox as a reply of that one call would (``EpisodeSession.step``), so the
episode records it (the call and its result, in its messages), the tools see the
episode's state, the turn counts toward ``max_steps_per_episode`` (the call that
reaches it ends the episode, ``done`` true) and the hook budgets apply. Calling the
tools beside the episode instead would change what the env's hooks later read with no
trace in the record. A session's first episode is started by its first call (as a
reset without data would: the split's next task); a call after the episode ended is
refused, saying to reset (over ``/ws``) or to create a new session. A tool's answer
that starts with ``Error`` (how tool envs answer a failed call) is reported as a
failure: ``error`` in the step's observation, a JSON-RPC error at ``/mcp``, as
openenv-core reports a tool that raised.

An env that is not a tool env answers ``tools/list`` and ``tools/call`` with
openenv's "Environment does not support MCP" error; its step actions are plain
actions (a ``list_tools`` action is then a ``VALIDATION_ERROR``, as on openenv-core).
"""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.mcp_types import (
    CallToolAction,
    JsonRpcErrorCode,
    JsonRpcRequest,
    JsonRpcResponse,
    ListToolsAction,
)
from pydantic import ValidationError

from agentsgym import TOOL_ERROR_PREFIX, AgentAction, MultistepEnv
from agentsgym_serve.errors import (
    EpisodeState,
    ServeError,
    ServerFull,
    SessionClosed,
    UnknownSession,
)
from agentsgym_serve.openenv_service import OpenEnvReset, OpenEnvService
from agentsgym_serve.sessions import Session

MCP_ACTIONS = {"list_tools": ListToolsAction, "call_tool": CallToolAction}
"""The step actions of openenv's MCP clients, by their ``type``."""
RPC_KEYS = ("name", "arguments", "session_id")
"""Params of tools/call that are not a fresh episode's task picker."""


class _RpcError(Exception):
    def __init__(self, code: JsonRpcErrorCode, message: str, data: Any = None) -> None:
        self.code, self.message, self.data = code, message, data


def rpc_error(
    code: JsonRpcErrorCode, message: str, request_id: Any = None, data: Any = None
) -> dict[str, Any]:
    """A JSON-RPC error response, as openenv-core writes it."""
    return JsonRpcResponse.error_response(
        code, message, data=data, request_id=request_id
    ).model_dump()


def session_key(session: Session) -> str:
    """The ``session_id`` a client is given: the id and the session's token (an MCP
    session is reached only by whoever created it)."""
    return f"{session.id}-{session.token}"


def _function(schema: dict[str, Any]) -> dict[str, Any]:
    function = schema.get("function", schema)
    return function if isinstance(function, dict) else {}


class McpService:
    """The MCP endpoints over an :class:`OpenEnvService` (see the module docstring)."""

    def __init__(self, openenv: OpenEnvService) -> None:
        self.openenv = openenv
        self.service = openenv.service
        env_class = self.service.host.env_class
        self.has_tools = env_class.episode_tools is not MultistepEnv.episode_tools

    # ------------------------------------------------------------------ the tools
    @staticmethod
    def tools(session: Session) -> list[dict[str, Any]]:
        """The episode's tools as openenv's ``Tool`` (``name``, ``description``,
        ``input_schema``): the schemas the model is shown."""
        listed = []
        for schema in session.play.tools if session.play is not None else ():
            function = _function(schema)
            listed.append(
                {
                    "name": str(function.get("name", "")),
                    "description": str(function.get("description") or ""),
                    "input_schema": function.get("parameters") or {},
                }
            )
        return listed

    async def _listed(self, session: Session) -> list[dict[str, Any]]:
        async with self.service._use(session):
            await self.openenv.in_episode(session)
            return self.tools(session)

    async def _call(
        self, session: Session, name: str, arguments: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any], str | None]:
        """One tool call as a tool turn (under the session's lock): the step's payload,
        openenv's tool result, and the failure (None: the tool answered)."""
        if not await self.openenv.in_episode(session):
            raise EpisodeState(
                f"episode {session.episode} of this session is over (at step {session.steps_taken}); "
                "reset it (over /ws) or create a new session (openenv/session/create)"
            )
        if name not in {t["name"] for t in self.tools(session)}:
            raise _RpcError(JsonRpcErrorCode.INVALID_PARAMS, f"Tool not found: {name}")
        call = {"type": "function", "function": {"name": name, "arguments": arguments}}
        payload, outcome = await self.openenv.turn(session, AgentAction("", tool_calls=[call]))
        answers = outcome.tool_results or []
        text = "\n\n".join(str(m.get("content", "")) for m in answers)
        failed = any(str(m.get("content", "")).startswith(TOOL_ERROR_PREFIX) for m in answers)
        result = {
            "content": [{"type": "text", "text": text}],
            "structured_content": None,
            "meta": None,
            "data": text,
            "is_error": failed,
        }
        return payload, result, text if failed else None

    # ------------------------------------------------------------------ /ws steps
    def is_mcp_action(self, data: dict[str, Any]) -> bool:
        """Whether a step's data is an MCP client's action this server answers."""
        return self.has_tools and data.get("type") in MCP_ACTIONS

    async def step(self, session: Session, data: dict[str, Any]) -> dict[str, Any]:
        """The payload answering an MCP step action (ValidationError for a bad one)."""
        action = MCP_ACTIONS[data["type"]].model_validate(data)
        if isinstance(action, ListToolsAction):
            tools = await self._listed(session)
            return {"observation": {"tools": tools}, "reward": None, "done": False}
        assert isinstance(action, CallToolAction)
        name = action.tool_name
        async with self.service._use(session):
            try:
                payload, result, failure = await self._call(session, name, action.arguments)
            except _RpcError as exc:  # no such tool: no turn
                error = {"error_type": "tool_not_found", "message": exc.message}
                nothing = {"observation": {}, "reward": None, "done": False}
                return _tool_reply(nothing, name, None, error)
            except EpisodeState as exc:  # the episode is over: nothing applied
                error = {"error_type": "execution_error", "message": exc.detail}
                return _tool_reply(self.openenv.over(session), name, None, error)
        error = None if failure is None else {"error_type": "execution_error", "message": failure}
        return _tool_reply(payload, name, result, error)

    # ------------------------------------------------------------------ JSON-RPC
    async def rpc(self, body: Any, session: Session | None = None) -> dict[str, Any]:
        """The JSON-RPC response to one request (a parsed JSON value); ``session``: the
        connection's own, for the ``mcp`` message of ``/ws``."""
        try:
            request = JsonRpcRequest.model_validate(body)
        except ValidationError as exc:
            return rpc_error(JsonRpcErrorCode.INVALID_REQUEST, f"Invalid request: {exc}")
        try:
            result = await self._method(request, session)
        except _RpcError as exc:
            return rpc_error(exc.code, exc.message, request.id, exc.data)
        except ValidationError as exc:  # a fresh episode's task picker, mistyped
            message = f"Invalid params: {exc}"
            return rpc_error(JsonRpcErrorCode.INVALID_PARAMS, message, request.id)
        except ServerFull as exc:
            data = {
                "active_sessions": exc.extra.get("sessions"),
                "max_sessions": exc.extra.get("max_sessions"),
            }
            return rpc_error(JsonRpcErrorCode.SERVER_ERROR, exc.detail, request.id, data)
        except ServeError as exc:
            return rpc_error(
                JsonRpcErrorCode.INTERNAL_ERROR, exc.detail, request.id, {"error": exc.code}
            )
        return JsonRpcResponse.success(result, request_id=request.id).model_dump()

    async def _method(self, request: JsonRpcRequest, own: Session | None) -> Any:
        method, params = request.method, request.params
        if method == "openenv/session/create":
            if own is not None:
                return {"session_id": session_key(own)}
            created = self.openenv.open()
            return {"session_id": session_key(created)}
        if method == "openenv/session/close":
            target = self._session(params.get("session_id"))
            if target is own:
                raise _RpcError(
                    JsonRpcErrorCode.INVALID_REQUEST,
                    "Cannot close active WebSocket-managed session via MCP method",
                )
            await self.openenv.close(target, "closed by the client")
            return {"session_id": params["session_id"], "closed": True}
        if method not in ("tools/list", "tools/call"):
            raise _RpcError(JsonRpcErrorCode.METHOD_NOT_FOUND, f"Method not found: {method}")
        if not self.has_tools:
            raise _RpcError(
                JsonRpcErrorCode.INTERNAL_ERROR,
                f"Environment does not support MCP: {self.openenv.env_id} is not a tool env "
                "(its episodes have no tools)",
            )
        if method == "tools/call":
            name, arguments = params.get("name"), params.get("arguments", {})
            if not name or not isinstance(name, str):
                raise _RpcError(JsonRpcErrorCode.INVALID_PARAMS, "Missing 'name' in params")
            if not isinstance(arguments, dict):
                raise _RpcError(JsonRpcErrorCode.INVALID_PARAMS, "'arguments' must be an object")
        target = own
        if target is None and params.get("session_id"):
            target = self._session(params["session_id"])
        if target is None:
            return await self._fresh(method, params)
        return await self._on(target, method, params)

    async def _on(self, session: Session, method: str, params: dict[str, Any]) -> Any:
        if method == "tools/list":
            return {"tools": _rpc_tools(await self._listed(session))}
        async with self.service._use(session):
            _, result, failure = await self._call(
                session, params["name"], params.get("arguments", {})
            )
        if failure is not None:
            raise _RpcError(JsonRpcErrorCode.INTERNAL_ERROR, failure, {"result": result})
        return result

    async def _fresh(self, method: str, params: dict[str, Any]) -> Any:
        """A call without a session: a fresh episode (its task picked by the other
        params, as a reset's data picks it), closed afterwards."""
        picker = OpenEnvReset.read({k: v for k, v in params.items() if k not in RPC_KEYS})
        session = self.openenv.open()
        try:
            await self.openenv.reset(session, picker)
            return await self._on(session, method, params)
        finally:
            await self.openenv.close(session, "a stateless MCP call (use a session for more)")

    def _session(self, key: Any) -> Session:
        """The session a ``session_id`` names (its creator's only)."""
        if not key or not isinstance(key, str):
            raise _RpcError(
                JsonRpcErrorCode.INVALID_PARAMS, "Invalid params - 'session_id' is required"
            )
        number, _, token = key.partition("-")
        try:
            session = self.service.table.get(int(number), token)
        except (ValueError, UnknownSession):
            raise _RpcError(JsonRpcErrorCode.INVALID_PARAMS, f"Unknown session_id: {key}") from None
        except SessionClosed as exc:
            raise _RpcError(
                JsonRpcErrorCode.INVALID_PARAMS, f"Unknown session_id: {key} ({exc.detail})"
            ) from None
        if session.origin != "openenv":
            raise _RpcError(JsonRpcErrorCode.INVALID_PARAMS, f"Unknown session_id: {key}")
        return session


def _tool_reply(
    payload: dict[str, Any], name: str, result: Any, error: dict[str, str] | None
) -> dict[str, Any]:
    """A step's payload with openenv's ``CallToolObservation`` fields added."""
    observation = {**payload["observation"], "tool_name": name, "result": result, "error": error}
    return {**payload, "observation": observation}


def _rpc_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tools as MCP's ``tools/list`` writes them (``inputSchema``)."""
    return [
        {"name": t["name"], "description": t["description"], "inputSchema": t["input_schema"]}
        for t in tools
    ]
