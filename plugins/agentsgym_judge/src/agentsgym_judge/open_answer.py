"""OpenAnswer (``judge/OpenAnswer-v0``), the example env of agentsgym-judge: the env and
its config. How it plays is the env class's docstring, which ``agentsgym describe``
shows."""

from __future__ import annotations

import random
import re
from typing import Any, ClassVar

from pydantic import Field

from agentsgym import EnvConfig, MultistepEnv, StepResult, hookimpl
from agentsgym.errors import DatasetRowError
from agentsgym_judge.config import JudgeConfig
from agentsgym_judge.judge import INFO_KEY, Judge

OPERATIONS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "×": lambda a, b: a * b}
INSTRUCTION = "Answer briefly."
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_NOT_WORD = re.compile(r"[\W_]+")


class OpenAnswerConfig(EnvConfig):
    """The judge, and the size of the env's own datasets."""

    max_steps_per_episode: int = Field(default=1, ge=1, le=1, description="one answer")
    judge: JudgeConfig = Field(
        default_factory=JudgeConfig, description="the judge's server, sampling and limits"
    )
    num_tasks: int = Field(default=64, ge=1, le=10_000, description="questions per split")
    largest_operand: int = Field(
        default=20, ge=1, le=10_000, description="operands of the questions run 1..this"
    )
    seed: int = Field(default=0, ge=0, le=2**63 - 1, description="seed of the questions drawn")


class OpenAnswerEnv(MultistepEnv):
    """A question answered in free text, scored by a judge model against a reference
    answer.

    One step: the agent answers ``task_data["question"]``; the judge (``env_config
    judge``, a :class:`~agentsgym_judge.config.JudgeConfig`) is asked whether the answer
    matches ``task_data["reference"]`` (the default template and the yes/no parser), and
    its score is the reward. Step ``info`` keeps:

    * ``judge``: the judgement (prompt, reply, score, model), which ``agentsgym view``
      shows under the step;
    * ``correct``: the judge said yes (score >= 0.5), the key ``agentsgym eval`` reads;
    * ``exact_match``: what an exact check says (the reply's last number equals a numeric
      reference; else the texts agree once case, spaces and punctuation are set aside),
      recorded beside the judge's verdict so their agreement can be measured
      (``bench/bench_judge.py``).

    A judge that fails (its server keeps failing, no verdict within its deadline, a reply
    with no yes or no) fails the episode with
    :class:`~agentsgym.errors.RewardUnavailableError`: unscored, left out of training and
    counted in the run's summary.

    Its own datasets are small arithmetic questions ("What is 7 + 5?"), where the exact
    check is right, so a judge can be measured against it; a dataset of other questions
    (rows with ``question`` and ``reference``) plays the same way.
    """

    config_class: ClassVar[type[EnvConfig]] = OpenAnswerConfig
    config: OpenAnswerConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.judge = Judge(self.config.judge)

    def close(self) -> None:
        self.judge.close()

    def get_train_dataset(self) -> Any:
        return self.make_dataset(self.questions("train"))

    def get_eval_dataset(self) -> Any:
        return self.make_dataset(self.questions("eval"))

    def questions(self, split: str) -> list[dict[str, str]]:
        """``num_tasks`` arithmetic questions of a split, drawn from ``seed``."""
        rng = random.Random(f"{self.config.seed}/{split}")
        top = self.config.largest_operand
        tasks = []
        for index in range(self.config.num_tasks):
            a, b = rng.randint(1, top), rng.randint(1, top)
            symbol = rng.choice(list(OPERATIONS))
            tasks.append(
                {
                    "id": f"{split}/{index}",
                    "question": f"What is {a} {symbol} {b}?",
                    "reference": str(OPERATIONS[symbol](a, b)),
                }
            )
        return tasks

    @hookimpl
    def initialize_episode(self, task_data: dict[str, Any]) -> dict[str, str]:
        missing = [
            key for key in ("question", "reference") if not isinstance(task_data.get(key), str)
        ]
        if missing:
            raise DatasetRowError(
                f"{type(self).__name__} needs task_data with string 'question' and "
                f"'reference'; this row lacks {', '.join(repr(k) for k in missing)}: "
                f"{task_data!r:.200}"
            )
        return {"question": task_data["question"], "reference": task_data["reference"]}

    @hookimpl
    def format_prompt(self, state: dict[str, str]) -> str:
        return f"{state['question']}\n{INSTRUCTION}"

    @hookimpl
    async def step_episode(self, state: dict[str, str], action: str) -> StepResult:
        verdict = await self.judge.ascore(
            question=state["question"], answer=action, reference=state["reference"]
        )
        info = {
            INFO_KEY: verdict.record(),
            "correct": verdict.score >= 0.5,
            "exact_match": exact_match(action, state["reference"]),
        }
        return StepResult(state, verdict.score, True, info)


def exact_match(reply: str, reference: str) -> bool:
    """The exact check: the reply's last number equals a numeric reference; otherwise
    the two texts agree once case, spaces and punctuation are set aside."""
    if _NUMBER.fullmatch(reference.strip()):
        numbers = _NUMBER.findall(reply)
        return bool(numbers) and float(numbers[-1]) == float(reference)
    return (
        _NOT_WORD.sub(" ", reply).strip().lower() == _NOT_WORD.sub(" ", reference).strip().lower()
    )
