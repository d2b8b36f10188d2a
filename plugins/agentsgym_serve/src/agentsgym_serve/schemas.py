"""The request and reply bodies of the env server: the wire contract (docs/serving.md).

Two families share one session table:

* **AgentGym's protocol** (``/create``, ``/reset``, ``/step``, ``/observation``,
  ``/close``), field for field as AgentGym's env servers speak it, so its clients
  work unchanged;
* **agentsgym's own** (``/agentsgym/v1/...``), which carries what that protocol
  drops: a full ``task_data``, chat messages (system prompts included), reward terms,
  step ``info``, and the counters that make every call safe to retry (each reply
  names the session, episode and step it answers).

Every body is validated: a wrong or missing field is a 422 naming it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

PROTOCOL = "agentsgym/v1"
V1_PREFIX = "/agentsgym/v1"

MAX_ID_TEXT = 256
MAX_ERROR_TEXT = 10_000


def integral_float_to_int(value: object) -> object:
    # JSON Schema's "integer" admits 3.0 (and JSON encoders in other languages write it),
    # while strict pydantic would refuse it; true, "3" and 3.5 still are refused.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


JsonInt = Annotated[int, BeforeValidator(integral_float_to_int)]
"""An integer as JSON Schema defines it: 3 and 3.0, never true or "3"."""

RolloutSeed = Annotated[
    JsonInt | None,
    Field(
        ge=0,
        le=2**64 - 1,
        description="an env with roles: the seed of the client's rollout (its agent's "
        "EpisodeContext.seed), which seeds the server's agents; default: this server "
        "counts the episodes of the task (rollouts 0, 1, 2...) and seeds them as a local "
        "run (seed 0) seeds those rollouts",
    ),
]
"""A reset's ``rollout_seed`` (agentsgym/v1's create and reset, AgentGym's reset)."""


class _Body(BaseModel):
    # Unknown fields are refused: a misspelt `data_idx` must not silently become task 0.
    # Strict types: `{"id": true}` or `{"id": "3"}` is a client's mistake, not session 1
    # or 3 (pydantic's lax mode would read them so). Integers are JsonInt.
    model_config = ConfigDict(extra="forbid", strict=True)


class ChatMessage(BaseModel):
    """One chat message, as chat templates take it (OpenAI's form for tool turns)."""

    model_config = ConfigDict(extra="forbid")

    role: str = Field(description="system, user, assistant, tool, ...")
    content: str
    tool_calls: list[dict[str, Any]] | None = Field(
        None, description="an assistant's tool calls, as the env's toolbox read them"
    )
    tool_call_id: str | None = Field(None, description="a tool message: the call it answers")
    name: str | None = Field(None, description="a tool message: the tool's name")


class ErrorReply(BaseModel):
    """Every error the server answers itself (422s from validation have FastAPI's shape)."""

    error: str = Field(description="a stable code: unknown_session, session_closed, ...")
    detail: str = Field(description="what was wrong and what to do, for a person")


class ValidationErrorReply(BaseModel):
    """A body that did not validate: FastAPI's shape, one entry per wrong field."""

    detail: list[dict[str, Any]] = Field(description="each entry's `loc` names the field")


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI `responses` of a route that can answer these error statuses."""
    # A 422 is either a body that did not validate or the server's own (bad_env_config).
    return {
        status: {"model": ErrorReply | ValidationErrorReply if status == 422 else ErrorReply}
        for status in statuses
    }


# ---------------------------------------------------------------------- AgentGym
class AgentGymCreated(BaseModel):
    id: int = Field(
        description="the new instance's id: never reused, and drawn afresh (a random "
        "base) each time the server starts, so an id from before a restart is unknown"
    )
    observation: str = Field(
        description="the first observation of task 0 of the split, which the instance "
        "starts on (AgentGym's TextCraft client reads it); empty for an env without that split"
    )
    reward: float = 0.0
    score: float = 0.0
    done: bool = False
    state: str = Field("", description="the observation again (WebShop's name for it)")
    task_description: str = Field("", description="the first prompt of task 0 as text")
    available_actions: list[str] = Field(
        default_factory=list, description="what the env offers, when it declares them"
    )


class _AgentGymBody(_Body):
    """An instance named ``id`` (BabyAI's, TextCraft's, SciWorld's, ALFWorld's and
    lmrlgym's clients) or ``env_idx`` (WebShop's, SQLGym's and the tool envs' clients)."""

    id: JsonInt | None = Field(None, description="the instance (or, next to env_idx, a task)")
    env_idx: JsonInt | None = Field(None, description="the instance, as some clients name it")

    @property
    def instance(self) -> int:
        """The instance the call is on."""
        return self.env_idx if self.env_idx is not None else self.id  # type: ignore[return-value]

    @model_validator(mode="after")
    def _names_an_instance(self) -> _AgentGymBody:
        if self.id is None and self.env_idx is None:
            raise ValueError("the body must name the instance: id (or env_idx)")
        return self


class AgentGymReset(_AgentGymBody):
    """The task is ``data_idx`` or whichever name the client gives the task index:
    ``game`` (ALFWorld, Maze), ``session_id`` (WebShop), ``item_id`` (SQLGym), ``idx``,
    ``seed`` (Wordle) or, in an ``env_idx`` body, ``id`` (the tool envs)."""

    data_idx: JsonInt | None = Field(
        None, ge=0, description="index of the task in the served dataset split (default 0)"
    )
    game: JsonInt | None = Field(None, ge=0, description="the task index (ALFWorld, Maze)")
    session_id: JsonInt | None = Field(None, ge=0, description="the task index (WebShop)")
    item_id: JsonInt | None = Field(None, ge=0, description="the task index (SQLGym)")
    idx: JsonInt | None = Field(None, ge=0, description="the task index")
    seed: JsonInt | None = Field(None, ge=0, description="the task index (Wordle)")
    world_type: str | None = Field(None, description="ALFWorld's; taken and ignored")
    rollout_seed: RolloutSeed = None

    @property
    def task_index(self) -> int:
        """The index of the task in the served split (0 when the body names none)."""
        return next(iter(self._task_fields().values()), 0)

    def _task_fields(self) -> dict[str, int]:
        names = ("data_idx", "game", "session_id", "item_id", "idx", "seed")
        given = {name: getattr(self, name) for name in names if getattr(self, name) is not None}
        if self.env_idx is not None and self.id is not None:
            given["id"] = self.id
        return given

    @model_validator(mode="after")
    def _one_task_index(self) -> AgentGymReset:
        given = self._task_fields()
        if len(given) > 1:
            raise ValueError(f"the body names more than one task index: {', '.join(given)}")
        if given.get("id", 0) < 0:
            raise ValueError("the task index id must be >= 0")
        return self


class AgentGymStep(_AgentGymBody):
    action: str

    @model_validator(mode="after")
    def _one_instance(self) -> AgentGymStep:
        _same_instance(self)
        return self


class AgentGymClose(_AgentGymBody):
    @model_validator(mode="after")
    def _one_instance(self) -> AgentGymClose:
        _same_instance(self)
        return self


def _same_instance(body: _AgentGymBody) -> None:
    if body.id is not None and body.env_idx is not None and body.id != body.env_idx:
        raise ValueError(f"id {body.id} and env_idx {body.env_idx} name different instances")


class AgentGymObservation(BaseModel):
    observation: str = Field(
        description="the env's new messages as text (contents joined by blank lines); empty "
        "once the episode is over"
    )
    reward: float = Field(
        description="the step's whole reward: env reward, shaping terms and, on the last "
        "step, the end-of-episode terms"
    )
    score: float = Field(
        description="the episode's rewards so far, this step's included (0 after a reset); "
        "AgentGym's BabyAI client reads it"
    )
    done: bool = Field(description="the episode is over (the env said so, or the step limit)")
    state: str = Field("", description="the observation again (WebShop's client reads `state`)")
    task_description: str = Field(
        "", description="the episode's first prompt as text (SciWorld's client reads it)"
    )
    available_actions: list[str] = Field(
        default_factory=list,
        description="what the env offers now, when it declares them (ALFWorld's client "
        "reads it); [] otherwise",
    )


class AgentGymObservationOnly(BaseModel):
    observation: str


class AgentGymClosed(BaseModel):
    closed: bool
    error: str | None = None


# ---------------------------------------------------------------------- agentsgym/v1
class EnvInfo(BaseModel):
    """What is served: ``GET /agentsgym/v1/env``."""

    protocol: Literal["agentsgym/v1"] = PROTOCOL
    env_id: str
    description: str = ""
    distribution: str | None = None
    version: str | None = None
    default_agent: str | None = Field(
        None, description="the agent the env registers for demos (a name clients may have)"
    )
    env_config: dict[str, Any] = Field(description="the served config (defaults + --env-config)")
    config_schema: dict[str, Any] = Field(description="JSON schema of the env's config")
    config_locked: bool = Field(description="clients may not change the served config")
    datasets: list[str] = Field(description="dataset splits the env ships (train, eval)")
    agentgym_split: str = Field(description="the split /reset's data_idx indexes")
    max_sessions: int
    idle_timeout_seconds: float
    server_instance: str = Field(description="random per server start: a restart changes it")
    has_tools: bool = Field(
        False, description="the env's episodes may have tools (POST /tools gives a task's)"
    )
    roles: list[str] = Field(
        default_factory=list, description="the env's roles (empty: a single-agent env)"
    )
    client_roles: list[str] = Field(
        default_factory=list,
        description="the roles a client may play here (the server's agents play the others)",
    )
    default_role: str | None = Field(
        None, description="the role of a session that names none (--client-role), if fixed"
    )
    role_agents: dict[str, str] = Field(
        default_factory=dict, description="the server's agent of each role it can play"
    )


class ConfigRequest(_Body):
    env_config: dict[str, Any] = Field(default_factory=dict)


class ConfigReply(BaseModel):
    env_config: dict[str, Any] = Field(description="the effective config: served + yours")
    role: str | None = Field(
        None,
        description="an env with roles: the role a session of this config plays unless it "
        "names one (else null)",
    )


class DatasetRequest(_Body):
    env_config: dict[str, Any] = Field(default_factory=dict)
    offset: JsonInt = Field(0, ge=0)
    limit: JsonInt = Field(1000, ge=1, le=10_000)
    role: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_ID_TEXT,
        description="an env with roles: the role the tasks are for (default: the server's "
        "default role); a task is sent without the other roles' private keys, with "
        "'agentsgym_task' naming it for the server",
    )


class DatasetReply(BaseModel):
    split: str
    total: int
    offset: int
    env_config: dict[str, Any]
    tasks: list[dict[str, Any]] = Field(description="task_data of rows offset..offset+limit")


class CreateRequest(_Body):
    request_id: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_ID_TEXT,
        description="your unique key for this create: a retry with the same key gets the "
        "same session instead of a second one",
    )
    env_config: dict[str, Any] = Field(
        default_factory=dict, description="layered over the served config"
    )
    task_data: dict[str, Any] | None = Field(
        None, description="start episode 1 of this task right away (saves a /reset)"
    )
    session_id: str | None = Field(
        None, max_length=MAX_ID_TEXT, description="the session id the env's hooks see"
    )
    role: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_ID_TEXT,
        description="an env with roles: the role this session plays (the server's agents "
        "play the others); default: the server's --client-role, else the env's first "
        "trainable role it can serve",
    )
    rollout_seed: RolloutSeed = None


class Created(BaseModel):
    id: int
    token: str = Field(description="send it with every call on this session")
    episode: int = Field(description="1 when task_data was given, else 0")
    env_config: dict[str, Any]
    messages: list[ChatMessage] = Field(description="the first prompt when task_data was given")
    observation: str
    role: str | None = Field(
        None, description="the role this session plays (an env with roles; else null)"
    )


class ResetRequest(_Body):
    token: str = Field(max_length=MAX_ID_TEXT)
    episode: JsonInt = Field(
        ge=1, description="the number of the episode this reset starts: 1 + the last one"
    )
    task_data: dict[str, Any]
    session_id: str | None = Field(None, max_length=MAX_ID_TEXT)
    role: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_ID_TEXT,
        description="an env with roles: the role played from this episode on (default: "
        "the session's)",
    )
    rollout_seed: RolloutSeed = None


class ResetReply(BaseModel):
    id: int
    episode: int
    messages: list[ChatMessage] = Field(description="the episode's first prompt")
    observation: str
    role: str | None = Field(
        None, description="the role this session plays (an env with roles; else null)"
    )


class StepRequest(_Body):
    token: str = Field(max_length=MAX_ID_TEXT)
    episode: JsonInt = Field(ge=1)
    step: JsonInt = Field(ge=0, description="index of this action in the episode, from 0")
    action: str = Field(description="the agent's reply text, exactly as generated")
    truncated: bool = Field(False, description="the reply was cut at the length limit")
    token_ids: list[JsonInt] | None = Field(None, description="the sampled ids, if any")
    tool_calls: list[dict[str, Any]] | None = Field(
        None,
        description="the reply's tool calls, as a chat server parsed them (OpenAI's form); "
        "without them, a tool env reads calls out of the action text",
    )


class StepReply(BaseModel):
    id: int
    episode: int
    step: int
    reward: float = Field(description="the env's step reward (without the terms)")
    reward_terms: dict[str, float] = Field(description="reward_shaping terms, by name")
    done: bool = Field(
        description="the env ended the episode (with roles: on this step or on a turn of "
        "the server's agents after it)"
    )
    truncated: bool = Field(description="the step limit ended it (done is false)")
    info: dict[str, Any] = Field(
        description="the env's step info; a tool turn's is {tool_calls: the calls answered}"
    )
    messages: list[ChatMessage] = Field(
        description="the next prompt (a tool turn's: the tool results); empty when over; "
        "with roles, the new messages of this session's role only"
    )
    observation: str
    tool_call_reply: ChatMessage | None = Field(
        None,
        description="a tool turn: the action as the env's toolbox read its calls (the "
        "assistant message the episode records); null for the env's own steps",
    )
    tool_results: list[ChatMessage] | None = Field(
        None,
        description="a tool turn: the tool messages that answered its calls (also the "
        "next prompt, unless the step limit ended the episode); null for the env's steps",
    )


class ToolsRequest(_Body):
    env_config: dict[str, Any] = Field(default_factory=dict)
    task_data: dict[str, Any] = Field(description="the task (as a dataset gave it)")


class ToolsReply(BaseModel):
    tools: list[dict[str, Any]] | None = Field(
        description="the OpenAI function schemas of the task's episode tools (the chat "
        "template's tools=), or null: its episodes have none"
    )


class FinishRequest(_Body):
    token: str = Field(max_length=MAX_ID_TEXT)
    episode: JsonInt = Field(ge=1)
    truncated: bool = False
    error: str | None = Field(None, max_length=MAX_ERROR_TEXT)
    close: bool = Field(True, description="close the session afterwards")


class FinishReply(BaseModel):
    id: int
    episode: int
    reward_terms: dict[str, float] = Field(description="finish_episode terms, by name")
    closed: bool


class TokenRequest(_Body):
    token: str = Field(max_length=MAX_ID_TEXT)


class Closed(BaseModel):
    id: int
    closed: bool = Field(description="false when it was already closed")


class SessionState(BaseModel):
    """``GET /agentsgym/v1/sessions/{id}``: the current episode as the agent saw it."""

    id: int
    episode: int
    step: int = Field(description="actions applied in this episode (with roles: this role's)")
    done: bool
    truncated: bool
    finished: bool
    messages: list[ChatMessage] = Field(
        description="the whole conversation of this episode, system prompt included"
    )
    observation: str
    role: str | None = Field(
        None, description="the role this session plays (an env with roles; else null)"
    )
    idle_seconds: float


class Health(BaseModel):
    """``GET /health``: exactly openenv-core's ``HealthResponse`` (``{"status": "healthy"}``,
    no other field: openenv's model forbids extras). The load is ``GET
    /agentsgym/v1/health``."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["healthy"] = "healthy"


class Load(BaseModel):
    """``GET /agentsgym/v1/health``: liveness and the server's load."""

    status: Literal["healthy"] = "healthy"
    env_id: str
    sessions: int = Field(description="live sessions, of every protocol")
    max_sessions: int
    server_instance: str = Field(description="drawn at start: a restarted server has another")
