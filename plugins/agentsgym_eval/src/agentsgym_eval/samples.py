"""Evaluation: play k rollouts per task and score them with :mod:`agentsgym_eval.metrics`.

Any env can be evaluated. What an env reports in its step ``info`` dicts decides how
a sample (one rollout of one task) is scored:

* ``info["correct"]`` (bool): whether that action solved the task. A sample is
  correct when any of its steps reports ``correct: True``. An env that never reports
  the key is scored by reward instead: the sample is correct when its final reward
  is positive.
* ``info["answer"]`` (any JSON value, usually a canonical string such as ``"3/4"``):
  the answer the action gave, used as the vote of cons@k. The sample's answer is the
  last non-``None`` one of its steps; envs should report equal answers in one
  canonical form so that votes agree (``"0.5"`` and ``"1/2"`` are different votes).

* ``info["graded"] = False``: the action could not be judged (a grader timed out or
  broke: the machine was slow, not the answer wrong). A sample with such a step that
  is not correct anyway is *ungraded*: it counts as not correct in the figures (so
  nothing is inflated) and is reported separately (``num_ungraded``), so a slow
  grader is never mistaken for a wrong model.

In an env with several roles (a game's seats) every role of a trial is a sample of its
own (``role``, and ``outcome``: what the env's ``role_rewards`` gave it), scored by the
step infos of that role's own actions; pass@k and the other figures group samples per
task and role, so one role's answers never vote in another's cons@k, and
``EvalReport.roles`` holds each role's own accuracy, pass@k, cons@k and best@k with
its win, draw and loss rates (:func:`role_reports`).

A failed episode (an exception in the env or the agent) is a wrong sample with no
answer, so a crash never inflates the scores; one whose reward could not be computed
(a judge failed: :class:`~agentsgym.errors.RewardUnavailableError`) is also counted
apart (``num_reward_unavailable``). Its error text is kept redacted
(:func:`agentsgym.redaction.redact_text`): an exception can quote the configuration
it failed with (a server URL with a key in it), and samples are written, logged and
shared.
"""

from __future__ import annotations

import json
import logging
import statistics
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from agentsgym.errors import is_reward_unavailable
from agentsgym.runtime import DEFAULT_MAX_CONCURRENCY, is_correct, redact_text, win_draw_loss
from agentsgym_eval import metrics

if TYPE_CHECKING:
    from agentsgym import Agent, Episode, MultistepEnv, TrajectoryBatch

logger = logging.getLogger(__name__)

ANSWER_KEY = "answer"
GRADED_KEY = "graded"


class Sample(BaseModel):
    """One scored rollout of one task: a row of the per-sample results file."""

    task_index: int
    rollout_index: int
    task_data: dict[str, Any]
    answer: str | None = Field(description="canonical answer (the cons@k vote), or None")
    correct: bool
    graded: bool = Field(
        default=True, description="False: a step could not be judged and none was correct"
    )
    final_reward: float
    num_turns: int
    truncated: bool = False
    error: str | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)
    step_infos: list[dict[str, Any]] = Field(default_factory=list)
    role: str | None = Field(default=None, description="the role played (envs with roles)")
    outcome: float | None = Field(default=None, description="the role's outcome (role_rewards)")


class Scores(BaseModel):
    """accuracy, pass@k, cons@k and best@k of samples grouped by task (see
    :mod:`agentsgym_eval.metrics`): a group's samples are one task's rollouts."""

    accuracy: float = Field(description="fraction of samples that are correct")
    pass_at_k: dict[int, float] = Field(description="unbiased pass@k per k, averaged over tasks")
    cons_at_k: float | None = Field(
        description="majority-vote accuracy over all num_rollouts samples; None when no "
        "sample gave an answer (nothing voted: a game, an env that reports no answer)"
    )
    best_at_k: float = Field(description="mean over tasks of the best reward among the samples")

    @classmethod
    def of_groups(cls, groups: Sequence[Sequence[Sample]], ks: Sequence[int]) -> Scores:
        """The scores of ``groups`` (each n samples in rollout order), pass@k for each k
        of ``ks`` up to n."""
        n = len(groups[0])
        counts = [(n, sum(s.correct for s in g)) for g in groups]
        voted = any(s.answer is not None for g in groups for s in g)
        return cls(
            accuracy=metrics.accuracy([s.correct for g in groups for s in g]),
            pass_at_k={k: metrics.mean_pass_at_k(counts, k) for k in ks if k <= n},
            cons_at_k=statistics.fmean(
                metrics.cons_at_k([s.answer for s in g], [s.correct for s in g]) for g in groups
            )
            if voted
            else None,
            best_at_k=statistics.fmean(
                metrics.best_at_k([s.final_reward for s in g]) for g in groups
            ),
        )


class RoleReport(Scores):
    """The figures of one role of an env with roles, over that role's samples only (its
    own answers vote in its cons@k): the scores, win, draw and loss rates from the
    outcomes ``role_rewards`` gave it (``None`` when it gave none), and its mean reward."""

    num_samples: int
    win_rate: float | None = Field(description="outcome > 0; None when the env gave none")
    draw_rate: float | None
    loss_rate: float | None = Field(description="outcome < 0, or the sample failed")
    mean_reward: float


def role_reports(
    samples: Sequence[Sample], ks: Sequence[int] | None = None
) -> dict[str, RoleReport]:
    """``{role: figures}`` of the samples that have a role (empty without roles); pass@k
    for each k of ``ks`` (default :func:`default_ks` of the rollouts per task)."""
    by_role: dict[str, list[Sample]] = {}
    for sample in samples:
        if sample.role is not None:
            by_role.setdefault(sample.role, []).append(sample)
    reports = {}
    for role, group in by_role.items():
        rates: tuple[float | None, ...] = (None, None, None)
        if any(s.outcome is not None for s in group):
            rates = win_draw_loss([None if s.error else s.outcome for s in group])
        tasks = task_groups(group)
        scores = Scores.of_groups(tasks, ks or default_ks(len(tasks[0])))
        reports[role] = RoleReport(
            **scores.model_dump(),
            num_samples=len(group),
            win_rate=rates[0],
            draw_rate=rates[1],
            loss_rate=rates[2],
            mean_reward=statistics.fmean(s.final_reward for s in group),
        )
    return reports


def task_groups(samples: Sequence[Sample]) -> list[list[Sample]]:
    """The samples of each task and role, in rollout order; every group must hold the
    same number of samples (the rollouts per task)."""
    by_task: dict[tuple[int, str | None], list[Sample]] = {}
    for sample in samples:
        by_task.setdefault((sample.task_index, sample.role), []).append(sample)
    sizes = {len(group) for group in by_task.values()}
    if len(sizes) != 1:
        raise ValueError(f"tasks have different numbers of samples {sorted(sizes)}; expected one n")
    return [sorted(g, key=lambda s: s.rollout_index) for g in by_task.values()]


class EvalReport(Scores):
    """Dataset-level figures of an evaluation run (what ``agentsgym eval`` prints). In
    an env with roles the scores pool every role's samples (each task's rollouts of one
    role a group, so no role's answer votes in another's); ``roles`` holds each role's
    own."""

    env_id: str
    num_tasks: int
    num_rollouts: int
    num_samples: int
    num_failed: int
    num_ungraded: int = Field(
        default=0, description="samples a grader could not judge (timeouts); not correct"
    )
    num_reward_unavailable: int = Field(
        default=0,
        description="failed samples whose reward could not be computed (a judge failed, "
        "agentsgym.errors.RewardUnavailableError); counted in num_failed too",
    )
    mean_reward: float
    mean_turns: float
    roles: dict[str, RoleReport] = Field(
        default_factory=dict,
        description="each role's figures (envs with roles): its scores and win rates",
    )


def sample_from_episode(episode: Episode) -> Sample:
    """Score one played episode (the scored episode of a trial)."""
    infos = [step.info for step in episode.steps]
    correct = is_correct(episode)
    answers = [info.get(ANSWER_KEY) for info in infos]
    answer = next((a for a in reversed(answers) if a is not None), None)
    return Sample(
        task_index=episode.task_index,
        rollout_index=episode.rollout_index,
        task_data=dict(episode.task_data),
        answer=None if answer is None or episode.error else _vote_key(answer),
        correct=correct,
        graded=correct or not any(info.get(GRADED_KEY) is False for info in infos),
        final_reward=episode.final_reward,
        num_turns=episode.num_turns,
        truncated=episode.truncated,
        error=None if episode.error is None else redact_text(episode.error),
        messages=[dict(m) for m in episode.messages],
        step_infos=infos,
        role=episode.role,
        outcome=episode.metrics.get("outcome") if episode.role is not None else None,
    )


def _vote_key(answer: Any) -> str:
    return answer if isinstance(answer, str) else json.dumps(answer, sort_keys=True, default=str)


def trial_sample(episodes: Sequence[Episode]) -> Sample:
    """The sample of one played trial: its scored (last) episode, failed or not."""
    if not episodes:
        raise ValueError("a trial with no episode has no sample")
    return sample_from_episode(episodes[-1])


def trial_samples(episodes: Sequence[Episode]) -> list[Sample]:
    """The samples of one played trial: one, or one per role (each role's last episode)."""
    if not episodes or episodes[-1].role is None:
        return [trial_sample(episodes)]
    last: dict[str, Episode] = {}
    for episode in episodes:
        last[str(episode.role)] = episode
    return [sample_from_episode(episode) for episode in last.values()]


def samples_from_batch(batch: TrajectoryBatch) -> list[Sample]:
    """One sample per trial (its scored, last episode), failed trials included."""
    samples = []
    for group in batch.groups:
        for trial in group.trials:
            if trial:
                samples.append(trial_sample(trial))
    return sorted(samples, key=lambda s: (s.task_index, s.rollout_index))


def samples_from_rows(rows: Sequence[dict[str, Any]]) -> list[Sample]:
    """Samples read back from a per-sample results file (``Sample.model_dump()`` rows)."""
    return sorted(
        (Sample.model_validate(row) for row in rows),
        key=lambda s: (s.task_index, s.rollout_index),
    )


def default_ks(num_rollouts: int) -> list[int]:
    """1, the powers of two below ``num_rollouts``, and ``num_rollouts`` itself."""
    ks = {1, num_rollouts}
    k = 2
    while k < num_rollouts:
        ks.add(k)
        k *= 2
    return sorted(ks)


def summarize(
    samples: Sequence[Sample], *, env_id: str, ks: Sequence[int] | None = None
) -> EvalReport:
    """Dataset-level metrics from per-sample results.

    Every task must have the same number of samples n (the rollouts per task); pass@k
    is reported for each k in ``ks`` (default :func:`default_ks`), cons@k and best@k
    for k = n.
    """
    if not samples:
        raise ValueError("no samples to summarize: did any task get played?")
    groups = task_groups(samples)  # per task and role
    n = len(groups[0])
    ks = ks or default_ks(n)
    return EvalReport(
        **Scores.of_groups(groups, ks).model_dump(),
        env_id=env_id,
        num_tasks=len({s.task_index for s in samples}),
        num_rollouts=n,
        num_samples=len(samples),
        num_failed=sum(1 for s in samples if s.error is not None),
        num_ungraded=sum(1 for s in samples if not s.graded),
        num_reward_unavailable=sum(is_reward_unavailable(s.error) for s in samples),
        mean_reward=statistics.fmean(s.final_reward for s in samples),
        mean_turns=statistics.fmean(s.num_turns for s in samples),
        roles=role_reports(samples, ks),
    )


def evaluate(
    env: MultistepEnv,
    agent: Agent,
    task_data_list: list[dict[str, Any]],
    num_rollouts: int,
    *,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    on_episode: Callable[[Episode], None] | None = None,
) -> tuple[list[Sample], EvalReport]:
    """Play ``num_rollouts`` trials of every task and score them."""
    if not task_data_list:
        raise ValueError("no tasks to evaluate")
    batch = env.run_trial(
        task_data_list, agent, num_rollouts, max_concurrency=max_concurrency, on_episode=on_episode
    )
    samples = samples_from_batch(batch)
    for failed in (s for s in samples if s.error is not None):
        logger.warning(
            "task %d rollout %d failed: %s", failed.task_index, failed.rollout_index, failed.error
        )
    return samples, summarize(samples, env_id=env.env_id)
