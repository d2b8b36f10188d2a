"""ClassicalEnv: answer a problem, get feedback on a wrong answer, try again.

One episode is one problem. Every agent reply is an attempt, judged by
:func:`agentsgym_classical.grading.grade`. A correct attempt ends the episode; a wrong
or unreadable one gets feedback and another attempt, up to
``max_steps_per_episode`` attempts. Rewards:

* ``step_episode``: ``correct_reward`` for the correct attempt, ``wrong_reward`` for
  a wrong one, ``unparsed_reward`` when no answer could be read (none found, too long,
  nested too deep);
* ``reward_shaping``: the term ``attempt_penalty`` (``-attempt_penalty``) on every
  attempt after the first, so solving sooner earns more.

A reply that could not be graded at all (every try within ``grading_budget_seconds``
timed out or the grader broke) is never scored: a reward that depends on how loaded
the machine was is wrong training data. The episode fails with a
:class:`~agentsgym_classical.errors.GradingError` instead, which the runner records,
``--max-failure-rate`` counts and trainers leave out. A long rambling or repeating
reply is not such a reply: the grader reads only its answer region (its last
``\\boxed{}`` on, else its last 2,000 characters), so it is judged, by its text alone,
and scored ``wrong_reward`` or ``unparsed_reward`` like any other.

A reply cut at the agent's length limit (``reply.truncated``) before any final-answer
marker (``\\boxed{``, ``####``) is not graded: its last number is a fragment of
unfinished work. It scores ``unparsed_reward``, its info says ``cut_off``, and the
feedback says it was cut off. Feedback on a wrong answer quotes the answer as the
grader read it, only when that is a short, well-formed expression
(:func:`agentsgym_classical.prompts.shown_answer`), and never the reference answer.

Step ``info`` carries ``correct`` and ``answer`` (the canonical parsed answer), the
keys ``agentsgym eval`` reads for accuracy, pass@k and cons@k, and ``graded`` (always
true here, since an ungraded reply fails the episode instead of being recorded).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from agentsgym import AgentAction, MultistepEnv, RewardTerm, StepResult, hookimpl
from agentsgym_classical import prompts
from agentsgym_classical.config import ClassicalConfig
from agentsgym_classical.errors import GradingError
from agentsgym_classical.grading import AnswerKind, Verdict, grade
from agentsgym_classical.grading.normalize import has_final_answer_marker
from agentsgym_classical.problem import Problem

logger = logging.getLogger(__name__)

Role = Literal["train", "eval"]


@dataclass(frozen=True)
class AttemptState:
    """The problem, how many attempts were made, and the feedback to show next."""

    problem: Problem
    attempts: int = 0
    feedback: str = ""
    solved: bool = False


class ClassicalEnv(MultistepEnv):
    """Base of the classical envs; subclasses say where problems come from."""

    config_class: ClassVar[type[ClassicalConfig]] = ClassicalConfig
    config: ClassicalConfig
    answer_kind: ClassVar[AnswerKind] = "math"
    default_instruction: ClassVar[str] = "Put your final answer in \\boxed{}."

    # ------------------------------------------------------------- problems
    def load_problems(self, role: Role) -> list[Problem]:
        """The problems of the train or eval split."""
        raise NotImplementedError

    def problem_prompt(self, problem: Problem) -> str:
        """The problem as first shown (formats with options list them here)."""
        return problem.problem

    @property
    def instruction(self) -> str:
        return self.config.instruction or self.default_instruction

    def get_train_dataset(self) -> Any:
        return self.make_dataset(p.to_task_data() for p in self.load_problems("train"))

    def get_eval_dataset(self) -> Any:
        return self.make_dataset(p.to_task_data() for p in self.load_problems("eval"))

    # ------------------------------------------------------------- episode hooks
    @hookimpl
    def initialize_episode(self, session_id: str, task_data: dict[str, Any]) -> AttemptState:
        return AttemptState(problem=Problem.from_task_data(task_data))

    @hookimpl
    def format_prompt(self, state: AttemptState, step: int) -> str:
        if step == 0:
            return prompts.first_prompt(
                self.problem_prompt(state.problem),
                self.instruction,
                self.config.max_steps_per_episode,
            )
        return state.feedback

    @hookimpl(specname="step_episode", tryfirst=True)
    def step_cut_off_reply(
        self, state: AttemptState, action: str, reply: AgentAction
    ) -> StepResult | None:
        """A reply cut at the length limit before a final-answer marker: its last number
        is a fragment of unfinished work, not an answer, so it is neither graded nor
        quoted. Any other reply goes on to :meth:`step_episode`."""
        if not reply.truncated or has_final_answer_marker(action):
            return None
        verdict = Verdict(status="unparsed", detail=prompts.CUT_OFF_DETAIL)
        return self._not_correct(state, verdict, {"cut_off": True})

    @hookimpl
    def step_episode(self, state: AttemptState, action: str) -> StepResult:
        problem = state.problem
        verdict = grade(
            problem.answer,
            action,
            kind=self.answer_kind,
            choices=problem.choices,
            timeout_seconds=self.config.grading_timeout_seconds,
            budget_seconds=self.config.grading_budget_seconds,
            max_reply_chars=self.config.max_reply_chars,
        )
        attempts = state.attempts + 1
        if not verdict.graded:
            raise self._grading_error(verdict, problem, attempts)
        if verdict.correct:
            next_state = AttemptState(problem, attempts, "", solved=True)
            return StepResult(
                next_state, self.config.correct_reward, True, self._info(verdict, attempts)
            )
        return self._not_correct(state, verdict)

    def _not_correct(
        self, state: AttemptState, verdict: Verdict, extra: dict[str, Any] | None = None
    ) -> StepResult:
        """The result of an attempt that was wrong or had no answer: feedback, next try."""
        attempts = state.attempts + 1
        left = self.config.max_steps_per_episode - attempts
        reward = (
            self.config.wrong_reward if verdict.status == "wrong" else self.config.unparsed_reward
        )
        next_state = AttemptState(
            state.problem, attempts, prompts.feedback(verdict, self.instruction, left)
        )
        info = {**self._info(verdict, attempts), **(extra or {})}
        return StepResult(next_state, reward, left <= 0, info)

    @hookimpl
    def reward_shaping(
        self, state: AttemptState, action: str, step_result: StepResult
    ) -> RewardTerm | None:
        if state.attempts >= 1 and self.config.attempt_penalty:
            return RewardTerm("attempt_penalty", -self.config.attempt_penalty)
        return None

    def _grading_error(self, verdict: Verdict, problem: Problem, attempt: int) -> GradingError:
        # What to do comes early: run summaries show an error's first 300 characters.
        budget = self.config.grading_budget_seconds
        error = GradingError(
            f"attempt {attempt} at problem {problem.id!r} could not be graded: "
            f"{verdict.attempts} tr{'y' if verdict.attempts == 1 else 'ies'} within the "
            f"{budget:g}s grading budget all failed (last: {verdict.status}, "
            f"{verdict.detail or 'no detail'}). If the machine is overloaded, run fewer "
            "episodes at once (--max-concurrency) or raise env_config grading_budget_seconds. "
            "The reply was not scored: the episode fails rather than record a reward nobody "
            "judged (a reply math-verify cannot finish at all, such as 9^9^9^9^9, fails the "
            "same way)."
        )
        logger.warning("%s", error)
        return error

    @staticmethod
    def _info(verdict: Verdict, attempt: int) -> dict[str, Any]:
        info: dict[str, Any] = {
            "attempt": attempt,
            "correct": verdict.correct,
            "answer": verdict.answer,
            "status": verdict.status,
            "graded": verdict.graded,
            "extracted": verdict.extracted,
            "grading_seconds": round(verdict.seconds, 4),
        }
        if verdict.attempts > 1:
            info["grading_attempts"] = verdict.attempts
        if verdict.detail:
            info["detail"] = verdict.detail
        return info
