"""``agentsgym train --eval-steps N --eval-tasks K``: held-out scores while training.

Every ``N`` optimizer steps, and after the last step, the player of the training
rollouts (the trainer's own model, the vLLM engine's agent or ``--agent``) plays each of
``K`` held-out tasks once, through a :class:`~agentsgym.runtime.RolloutSource` built
like the training one (the core's runner, the run's executor, opponents, tokenizer and
``--max-concurrency``). Decoding is **sampled**, at the training ``--temperature``, as
TRL's ``GRPOTrainer`` evaluates with its generation settings: every player the run may
have (a vLLM server, a served policy, an OpenAI-compatible agent) can do it. Nothing is
trained on these episodes and they are not recorded in ``played.jsonl`` (what training
played).

The step's entry of the step log gets (names under :data:`EVAL_PREFIX`):

* ``eval/reward_mean`` and ``eval/reward_std``: the final rewards of the held-out
  episodes (in an env with roles, those of the trained roles);
* ``eval/success_rate``: the fraction of them that solved the task, by ``agentsgym
  eval``'s rule (:func:`agentsgym.runtime.is_correct`; a failed episode did not);
* ``eval/num_tasks``, ``eval/num_failed``; in an env with roles, each role's
  ``eval/reward/<role>`` (and ``eval/win_rate/<role>``... for a game with outcomes).

Held-out tasks (:func:`held_out_rows`): training on ``--split train`` takes the first
``K`` rows of the env's eval split (disjoint from the train split in envs whose splits
are: GuessTheNumber's odd seeds, a dataset's test split); training on ``--split eval``
takes the ``K`` eval rows after the ``--num-tasks`` trained ones.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import typer

from agentsgym import TrajectoryBatch
from agentsgym.errors import TrainerOptionError
from agentsgym.runtime import RolloutSource, StepMetrics, is_correct
from agentsgym_trl.train_keywords import train_takes

if TYPE_CHECKING:
    from agentsgym import Agent

logger = logging.getLogger(__name__)

EVAL_PREFIX = "eval/"
"""The prefix of the held-out scores in the step log and the tracker (TRL's, too)."""
DEFAULT_EVAL_TASKS = 16
"""``--eval-tasks`` when it is not given (fewer when the held-out split has fewer)."""


class HeldOutEval:
    """The held-out tasks of a run and when to play them (see the module docstring).

    :param source: plays the held-out tasks (its rows, one rollout each).
    :param every: evaluate after every ``every`` steps (at least 1).
    :param last_step: and after this one (the run's ``max_steps``).
    :param trained_roles: in an env with roles, whose episodes are scored (``None``:
        every episode).
    """

    def __init__(
        self,
        source: RolloutSource,
        *,
        every: int,
        last_step: int,
        trained_roles: Sequence[str] | None = None,
    ) -> None:
        if every < 1:
            raise ValueError(f"evaluations every {every} steps: give at least 1")
        self.source = source
        self.every = every
        self.last_step = last_step
        self.trained_roles = None if trained_roles is None else frozenset(trained_roles)

    def due(self, step: int) -> bool:
        """Whether an evaluation follows ``step``."""
        return step % self.every == 0 or step == self.last_step

    def after_step(self, metrics: StepMetrics, agent: Agent) -> None:
        """When one is due after ``metrics.step``: play the held-out tasks with ``agent``
        and add their scores to the step's entry."""
        if self.due(metrics.step):
            metrics.extra.update(self.scores(agent))

    def scores(self, agent: Agent) -> dict[str, float]:
        """Play every held-out task once with ``agent``; the scores, named ``eval/...``."""
        batch = self.source.play(self.source.rows, agent, num_rollouts=1)
        scores = {f"{EVAL_PREFIX}{k}": v for k, v in self._figures(batch).items()}
        logger.info("held-out scores: %s", scores)
        return scores

    def _figures(self, batch: TrajectoryBatch) -> dict[str, float]:
        groups = [
            group
            for group in batch.groups
            if self.trained_roles is None or group.role in self.trained_roles
        ]
        scored = [episode for group in groups for episode in group.episodes]
        failed = [episode for group in groups for episode in group.failed]
        figures: dict[str, float] = {
            "num_tasks": float(len(self.source.rows)),
            "num_failed": float(len(failed)),
        }
        played = scored + failed
        if played:
            figures["success_rate"] = sum(is_correct(e) for e in played) / len(played)
        if scored:
            rewards = [episode.final_reward for episode in scored]
            figures["reward_mean"] = statistics.fmean(rewards)
            figures["reward_std"] = statistics.pstdev(rewards)
        # each role's reward and game outcomes, as the step log has them for training
        roles = StepMetrics.of_batch(batch, 0).extra
        figures.update({k: v for k, v in roles.items() if k.split("/")[0] in _ROLE_FIGURES})
        return figures


_ROLE_FIGURES = ("reward", "win_rate", "draw_rate", "loss_rate")


def held_out_rows(
    env_id: str, env: Any, *, split: str, num_trained: int, eval_tasks: int | None
) -> list[Any]:
    """The held-out tasks of a run that trains on the first ``num_trained`` rows of
    ``split`` (see the module docstring); ``eval_tasks`` of them (``None``: up to
    :data:`DEFAULT_EVAL_TASKS`). Too few is an error that says how many there are."""
    try:
        dataset = env.get_eval_dataset()
    except NotImplementedError:
        raise typer.BadParameter(
            f"{env_id} has no eval split to hold tasks out of, so --eval-steps cannot "
            "evaluate; drop --eval-steps"
        ) from None
    first = num_trained if split == "eval" else 0
    available = max(0, len(dataset) - first)
    where = (
        f"the eval split of {env_id} has {available} tasks after the {num_trained} trained "
        "ones (--split eval trains on its first --num-tasks)"
        if split == "eval"
        else f"the eval split of {env_id} has {available} tasks"
    )
    if eval_tasks is None:
        eval_tasks = min(DEFAULT_EVAL_TASKS, available)
    elif eval_tasks > available:
        raise typer.BadParameter(
            f"--eval-tasks {eval_tasks}: {where}; give --eval-tasks {available} or fewer"
        )
    if eval_tasks < 1:
        raise typer.BadParameter(
            f"--eval-steps: {where}, none held out to evaluate on; train on --split train, "
            "or on fewer --num-tasks"
        )
    return [dataset[i] for i in range(first, first + eval_tasks)]


def evaluation_keywords(
    adapter: Any, trainer: str, evaluation: HeldOutEval | None
) -> dict[str, Any]:
    """``{"evaluation": evaluation}`` for ``adapter.train``; ``{}`` without one. An
    adapter whose ``train`` does not take it is refused (it cannot evaluate)."""
    if evaluation is None:
        return {}
    if not train_takes(adapter, "evaluation"):
        raise TrainerOptionError(
            f"trainer {trainer} does not evaluate during training; drop --eval-steps and "
            "evaluate its saved model with `agentsgym eval`"
        )
    return {"evaluation": evaluation}
