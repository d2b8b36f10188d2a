"""env_config of the classical envs.

``ClassicalConfig`` holds what every classical env shares (attempts, rewards,
grading limits); ``BenchmarkConfig`` adds where the problems come from (a Hugging
Face dataset, a local file, or by default the embedded generated family), and
``ArithmeticConfig`` the knobs of the generated family itself.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from agentsgym import EnvConfig
from agentsgym_classical.grading import DEFAULT_BUDGET_SECONDS

MAX_REWARD = 1e6
MAX_DATASET_NAME = 4096
MAX_NUM_TASKS = 100_000
"""Problems per split: the embedded family generates them before the first episode
(about 12,000 a second), so a count is bounded."""


class ClassicalConfig(EnvConfig):
    """Attempts, rewards and grading limits shared by every classical env."""

    max_steps_per_episode: int = Field(
        default=3,
        ge=1,
        description="attempts per problem: a wrong answer gets feedback and another try",
    )
    correct_reward: float = Field(
        default=1.0,
        ge=-MAX_REWARD,
        le=MAX_REWARD,
        description="reward of the attempt that is correct",
    )
    wrong_reward: float = Field(
        default=0.0, ge=-MAX_REWARD, le=MAX_REWARD, description="reward of a wrong attempt"
    )
    unparsed_reward: float = Field(
        default=0.0,
        ge=-MAX_REWARD,
        le=MAX_REWARD,
        description="reward of an attempt with no final answer found (or too long to grade)",
    )
    attempt_penalty: float = Field(
        default=0.1,
        ge=0.0,
        le=MAX_REWARD,
        description="subtracted for every attempt after the first (reward term 'attempt_penalty')",
    )
    grading_timeout_seconds: float = Field(
        default=5.0,
        gt=0.0,
        le=300.0,
        description="wall-clock limit of the first try at judging one reply",
    )
    grading_budget_seconds: float = Field(
        default=DEFAULT_BUDGET_SECONDS,
        gt=0.0,
        le=3600.0,
        description="a reply that could not be judged in time is judged again, each try "
        "with 4x the last one's limit, while the tries' limits add up to at most this "
        "(a turn is also cut at hook_timeout_seconds); if none succeeds the episode fails "
        "with a GradingError, never scored as wrong",
    )
    max_reply_chars: int = Field(
        default=100_000,
        ge=1,
        le=10_000_000,
        description="longer replies are judged wrong without being read",
    )
    instruction: str | None = Field(
        default=None, description="replaces the env's instruction after the problem (answer format)"
    )
    num_tasks: int | None = Field(
        default=None,
        ge=1,
        le=MAX_NUM_TASKS,
        description="take at most this many problems per split (unset: all of a dataset's, "
        "1000 train / 200 eval embedded problems)",
    )
    seed: int = Field(
        default=0, ge=0, le=2**63 - 1, description="seed of the embedded generated problems"
    )


class BenchmarkConfig(ClassicalConfig):
    """Where a benchmark env reads its problems from."""

    dataset: str | dict[str, str] | None = Field(
        default=None,
        description="Hugging Face dataset name, a local .json/.jsonl/.parquet file (the eval "
        "split), or {split: file}; unset: the embedded generated problems (offline)",
    )
    dataset_config: str | None = Field(
        default=None, description="Hugging Face config name, e.g. 'main' for openai/gsm8k"
    )
    train_split: str | None = Field(
        default="train",
        description="split read by get_train_dataset; null for an eval-only benchmark",
    )
    eval_split: str = Field(default="test", description="split read by get_eval_dataset")
    columns: dict[str, str] = Field(
        default_factory=dict,
        description="the env's field name -> the dataset's column name, when they differ",
    )

    @field_validator("dataset")
    @classmethod
    def _names_fit_a_path(cls, value: str | dict[str, str] | None) -> Any:
        names = [] if value is None else [value] if isinstance(value, str) else value.values()
        for name in names:
            if len(name) > MAX_DATASET_NAME:
                raise ValueError(
                    f"a dataset name or file path of {len(name)} characters is longer than "
                    f"any path ({MAX_DATASET_NAME}); give a Hugging Face dataset name or a "
                    "path to a .jsonl/.parquet file"
                )
        return value

    @model_validator(mode="after")
    def _splits_differ(self) -> BenchmarkConfig:
        if self.train_split is not None and self.train_split == self.eval_split:
            raise ValueError(
                f"train_split and eval_split are both {self.train_split!r}; they must differ "
                "so that train and eval problems are disjoint"
            )
        return self


class ArithmeticConfig(ClassicalConfig):
    """The embedded family of generated multi-step arithmetic word problems."""

    min_operations: int = Field(default=2, ge=1, le=8, description="fewest operations per problem")
    max_operations: int = Field(default=4, ge=1, le=8, description="most operations per problem")

    @model_validator(mode="after")
    def _operation_range(self) -> ArithmeticConfig:
        if self.min_operations > self.max_operations:
            raise ValueError(
                f"min_operations ({self.min_operations}) exceeds "
                f"max_operations ({self.max_operations})"
            )
        return self
