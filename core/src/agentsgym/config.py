"""EnvConfig: the validated env_config every env instance is built from."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agentsgym.errors import EnvConfigError

RewardStrategyName = Literal["spread", "last_token", "terminal"]
TemplateMismatchPolicy = Literal["split", "error"]


class EnvConfig(BaseModel):
    """Settings constant across the tasks of one env instance.

    Subclass it to declare an env's own keys (with types and defaults) and point
    ``MultistepEnv.config_class`` at the subclass. Unknown keys are rejected, so a
    typo in a dataset's env_config fails loudly instead of being ignored.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_steps_per_episode: int = Field(
        default=10, ge=1, description="agent actions after which an episode is truncated"
    )
    episodes_per_trial: int = Field(
        default=1, ge=1, description="episodes the agent plays in sequence per trial"
    )
    free_shots: int = Field(
        default=0, ge=0, description="leading episodes of a trial that earn no reward"
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
        description="extra variables for the chat template (e.g. date_string, "
        "enable_thinking)",
    )

    @model_validator(mode="after")
    def _free_shots_leave_a_scored_episode(self) -> EnvConfig:
        if self.free_shots >= self.episodes_per_trial:
            raise ValueError(
                f"free_shots ({self.free_shots}) must be smaller than episodes_per_trial "
                f"({self.episodes_per_trial}): the trial's final episode is the scored one"
            )
        return self

    @classmethod
    def parse(cls, env_config: dict[str, Any] | None, *, env_name: str) -> EnvConfig:
        """Validate a raw env_config, turning pydantic's error into an EnvConfigError."""
        try:
            return cls.model_validate(env_config or {})
        except ValidationError as exc:
            raise EnvConfigError(
                describe_validation_error(exc, f"env_config of {env_name}", known=list(cls.model_fields))
            ) from None


def describe_validation_error(
    exc: ValidationError, what: str, *, known: list[str] | None = None
) -> str:
    """One readable line per problem: the field, the value given, what was expected."""
    lines = [f"invalid {what}:"]
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "(root)"
        if err["type"] == "extra_forbidden":
            hint = f"; known keys: {', '.join(known)}" if known else ""
            lines.append(f"  - unknown key {field!r} (value {err['input']!r}){hint}")
        else:
            given = err.get("input")
            lines.append(f"  - {field}: {err['msg']} (got {given!r} of type {type(given).__name__})")
    return "\n".join(lines)
