"""The registered envs: four benchmark formats and the embedded arithmetic family.

Each benchmark env reads a Hugging Face dataset or local file in its format (see
:mod:`.sources`), or, with ``dataset`` unset, the embedded generated problems
written in that format, so every env runs offline out of the box.
"""

from __future__ import annotations

from typing import Any, ClassVar

from agentsgym.errors import EnvConfigError
from agentsgym_classical.arithmetic.generator import format_number
from agentsgym_classical.config import ArithmeticConfig, BenchmarkConfig
from agentsgym_classical.embedded import embedded_problems
from agentsgym_classical.env import ClassicalEnv, Role
from agentsgym_classical.errors import NoSuchSplitError
from agentsgym_classical.formats import (
    AIMEFormat,
    BenchmarkFormat,
    GSM8KFormat,
    MathFormat,
    MultipleChoiceFormat,
    RowReader,
)
from agentsgym_classical.problem import Problem
from agentsgym_classical.sources import describe, load_split


class BenchmarkEnv(ClassicalEnv):
    """A classical env whose problems come in a benchmark's row format."""

    config_class = BenchmarkConfig
    config: BenchmarkConfig
    format: ClassVar[BenchmarkFormat]

    def __init__(
        self, tokenizer: Any = None, env_config: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(tokenizer, env_config, **kwargs)
        unknown = sorted(set(self.config.columns) - set(self.format.fields))
        if unknown:
            raise EnvConfigError(
                f"env_config columns of {type(self).__name__} maps unknown field(s) {unknown}; "
                f"the fields of the {self.format.name} format are {list(self.format.fields)} "
                "(columns maps field -> your dataset's column name)"
            )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "format" in cls.__dict__:  # each format brings its answer kind and instruction
            cls.answer_kind = cls.format.kind
            cls.default_instruction = cls.format.instruction

    def problem_prompt(self, problem: Problem) -> str:
        return self.format.prompt(problem)

    def load_problems(self, role: Role) -> list[Problem]:
        config = self.config
        split = (config.train_split or "train") if role == "train" else config.eval_split
        if config.dataset is None:
            rows = [
                self.format.embedded_row(p)
                for p in embedded_problems(role, num_tasks=config.num_tasks, seed=config.seed)
            ]
            source = "embedded problems"
        else:
            if role == "train" and config.train_split is None:
                raise NoSuchSplitError(
                    f"{describe(config.dataset, config.dataset_config)} has no train split "
                    "(train_split is null): it is an eval-only benchmark. Play it with "
                    "`--split eval`."
                )
            rows = load_split(
                config.dataset,
                split,
                role=role,
                dataset_config=config.dataset_config,
                other_split=config.eval_split if role == "train" else config.train_split,
            )
            source = describe(config.dataset, config.dataset_config)
        if config.num_tasks is not None:
            rows = rows[: config.num_tasks]
        return [
            self.format.to_problem(
                RowReader(row, index, split=split, source=source, columns=config.columns)
            )
            for index, row in enumerate(rows)
        ]


class GSM8KEnv(BenchmarkEnv):
    """GSM8K rows: ``question``, ``answer`` ending in ``#### N``."""

    format = GSM8KFormat()


class MathEnv(BenchmarkEnv):
    """MATH / MATH-500 rows: ``problem``, ``solution``, ``answer`` (LaTeX answers)."""

    format = MathFormat()


class AIMEEnv(BenchmarkEnv):
    """AIME rows: ``problem``, integer ``answer`` from 0 to 999."""

    format = AIMEFormat()


class MultipleChoiceEnv(BenchmarkEnv):
    """Multiple-choice rows, AQuA-RAT style: ``question``, ``options``, ``correct``."""

    format = MultipleChoiceFormat()


class ArithmeticEnv(ClassicalEnv):
    """The embedded family: generated multi-step arithmetic word problems, exact answers."""

    config_class = ArithmeticConfig
    config: ArithmeticConfig
    default_instruction = (
        "Solve the problem step by step and put the final answer, a whole number, in \\boxed{}."
    )

    def load_problems(self, role: Role) -> list[Problem]:
        config = self.config
        problems = embedded_problems(
            role,
            num_tasks=config.num_tasks,
            seed=config.seed,
            min_operations=config.min_operations,
            max_operations=config.max_operations,
        )
        split = "train" if role == "train" else "eval"
        return [
            Problem(id=f"{split}/{index}", problem=p.text(), answer=format_number(p.answer()))
            for index, p in enumerate(problems)
        ]
