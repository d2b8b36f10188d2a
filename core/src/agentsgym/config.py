"""EnvConfig: the validated env_config every env instance is built from."""

from __future__ import annotations

import difflib
import types
from collections.abc import Mapping
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from agentsgym.errors import EnvConfigError

__all__ = [
    "MAX_EPISODES_PER_TRIAL",
    "MAX_STEPS_PER_EPISODE",
    "MAX_TIMEOUT_SECONDS",
    "EnvConfig",
    "RewardStrategyName",
    "TemplateMismatchPolicy",
    "describe_validation_error",
]

RewardStrategyName = Literal["spread", "last_token", "terminal"]
TemplateMismatchPolicy = Literal["split", "error"]

MAX_STEPS_PER_EPISODE = 10_000
MAX_EPISODES_PER_TRIAL = 1_000
MAX_TIMEOUT_SECONDS = 7 * 24 * 3600.0

_BOUND_KINDS = ((annotated_types.Ge, annotated_types.Gt), (annotated_types.Le, annotated_types.Lt))


class EnvConfig(BaseModel):
    """Settings constant across the tasks of one env instance. An env declares its own
    keys in a subclass set as ``MultistepEnv.config_class``. Unknown keys are rejected,
    so a typo in a dataset's env_config fails loudly instead of being ignored."""

    # A NaN or an infinite reward, budget or bound is never meant.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    max_steps_per_episode: int = Field(
        default=10,
        ge=1,
        le=MAX_STEPS_PER_EPISODE,
        description="agent actions after which an episode is truncated",
    )
    episodes_per_trial: int = Field(
        default=1,
        ge=1,
        le=MAX_EPISODES_PER_TRIAL,
        description="episodes the agent plays in sequence per trial",
    )
    free_shots: int = Field(
        default=0,
        ge=0,
        le=MAX_EPISODES_PER_TRIAL - 1,
        description="leading episodes of a trial that earn no reward",
    )
    hook_timeout_seconds: float = Field(
        default=300.0,
        gt=0.0,
        le=MAX_TIMEOUT_SECONDS,
        description="wall-clock budget of one env turn: the hook calls between two agent "
        "actions (step_episode, reward_shaping, format_prompt). An episode over it fails "
        "with a timeout error",
    )
    episode_timeout_seconds: float = Field(
        default=3600.0,
        gt=0.0,
        le=MAX_TIMEOUT_SECONDS,
        description="wall-clock budget of one whole episode, agent calls included",
    )
    reward_strategy: RewardStrategyName = Field(
        default="spread",
        description="how step rewards become per-token rewards: spread over the action's "
        "tokens, on its last token, or the final reward spread over all agent tokens",
    )
    on_template_mismatch: TemplateMismatchPolicy = Field(
        default="split",
        description="what to do when the chat template re-renders earlier turns "
        "differently from what the model saw: split the episode into per-view segments, "
        "or raise",
    )
    chat_template_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="extra variables for the chat template (e.g. date_string, enable_thinking)",
    )
    trainable_roles: list[str] | None = Field(
        default=None,
        description="an env with roles: the roles whose episodes go into training batches "
        "(default: those it declares trainable); '[\"x\"]' trains x against a frozen "
        "opponent",
    )

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass that redeclares a common key (for another default) keeps that key's
        bounds unless it sets its own: ``max_steps_per_episode`` stays at most 10,000."""
        super().__pydantic_init_subclass__(**kwargs)
        changed = False
        for name, base in EnvConfig.model_fields.items():
            field = cls.model_fields.get(name)
            if field is None or field is base:
                continue
            for kinds in _BOUND_KINDS:
                if not any(isinstance(m, kinds) for m in field.metadata):
                    inherited = [m for m in base.metadata if isinstance(m, kinds)]
                    field.metadata.extend(inherited)
                    changed = changed or bool(inherited)
        if changed:
            cls.model_rebuild(force=True)

    @model_validator(mode="before")
    @classmethod
    def _counts_are_integers(cls, data: Any) -> Any:
        # pydantic's lax mode would take 3.0 or True for an int: a mistake (1.2e16 episodes).
        if isinstance(data, Mapping):
            for name, field in cls.model_fields.items():
                value = data.get(name, data.get(field.alias) if field.alias else None)
                if _is_int_field(field.annotation) and isinstance(value, (bool, float)):
                    raise ValueError(
                        f"{name} must be an integer, got {value!r} ({type(value).__name__})"
                    )
        return data

    @model_validator(mode="after")
    def _free_shots_leave_a_scored_episode(self) -> EnvConfig:
        if self.free_shots >= self.episodes_per_trial:
            raise ValueError(
                f"free_shots ({self.free_shots}) must be smaller than episodes_per_trial "
                f"({self.episodes_per_trial}): the trial's final episode is the scored one"
            )
        return self

    @model_serializer(mode="wrap")
    def _leave_out_unset_roles(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Only an env with roles takes trainable_roles: the rows and configs of every
        # other env read as they did before the key existed.
        dumped: dict[str, Any] = handler(self)
        if dumped.get("trainable_roles", ...) is None:
            del dumped["trainable_roles"]
        return dumped

    @classmethod
    def parse(cls, env_config: dict[str, Any] | None, *, env_name: str) -> EnvConfig:
        """Validate a raw env_config, turning pydantic's error into an EnvConfigError."""
        if env_config is not None and not isinstance(env_config, Mapping):
            raise EnvConfigError(
                f"env_config of {env_name} must be a dict of settings (key -> value), got "
                f"{type(env_config).__name__}: {env_config!r:.80}"
            )
        try:
            return cls.model_validate(dict(env_config or {}))
        except ValidationError as exc:
            what = f"env_config of {env_name}"
            known = list(cls.model_fields)
            raise EnvConfigError(describe_validation_error(exc, what, known=known)) from None


def describe_validation_error(
    exc: ValidationError, what: str, *, known: list[str] | None = None
) -> str:
    """One readable line per problem: the field, the value given, what was expected."""
    lines = [f"invalid {what}:"]
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "(root)"
        if err["type"] == "extra_forbidden":
            hint = _unknown_key_hint(field, known or [])
            lines.append(f"  - unknown key {field!r} (value {err['input']!r}){hint}")
        elif not err["loc"]:  # a model-level check: its message names the key itself
            lines.append(f"  - {err['msg'].removeprefix('Value error, ')}")
        else:
            given = err.get("input")
            got = f"{given!r:.200} of type {type(given).__name__}"
            lines.append(f"  - {field}: {err['msg']} (got {got})")
    return "\n".join(lines)


def _unknown_key_hint(field: str, known: list[str]) -> str:
    """The keys an unknown key was probably meant to be, or else all the known keys."""
    close = difflib.get_close_matches(field, known, cutoff=0.6)
    if not close and len(field) > 3:
        close = [key for key in known if field in key]
    if close:
        return f"; did you mean {' or '.join(map(repr, close[:3]))}?"
    if known:
        return f"; known keys: {', '.join(known)}"
    return ""


def _is_int_field(annotation: Any) -> bool:
    """``int`` or ``int | None`` (bool is a subclass of int, but not a count)."""
    if get_origin(annotation) in (Union, types.UnionType):
        return [a for a in get_args(annotation) if a is not type(None)] == [int]
    return annotation is int
