"""``trl-grpo --async --max-staleness K``: TRL's ``rollout_func`` takes from a rollout stream.

TRL drives the loop and asks the ``rollout_func`` for each step's completions. With
``--async`` the answer is already being played: a
:class:`~agentsgym_trl.rollout_stream.RolloutStream` plays the prompts TRL will ask for
(:mod:`agentsgym_trl.trl_prompt_plan`) up to ``K`` steps ahead, each prompt entry a
trial of its own as in the synchronous run, with the versioned policy agent.

* **Versions.** The trainer's version is TRL's ``global_step``. The trainer holds
  the policy agent's weights (``TransformersAgent.updating_weights``) from the moment
  the ``rollout_func`` has a step's batch until it waits for the next one: TRL's
  scoring, loss, update and logging never run beside a generation (which switches the
  shared model to eval mode, and TRL reads the mode), and no reply is sampled from
  half-updated weights. The agent's version becomes the new ``global_step`` when the
  hold ends; at ``on_step_end`` the stream is told (:class:`StreamCallback`), so later
  steps may start to play. A given agent (not the trainer's own policy) is versioned
  by itself or, if it cannot say, by the version at dispatch (see the stream).
* **The bound.** The stream plays step ``s`` only once ``global_step >= s - 1 - K`` and
  checks every group again when TRL takes it; a group over the bound becomes a failed
  completion (reward ``None``: advantage 0, fully masked). No trained token is older
  than ``K`` versions. The stream plays each prompt entry as a group of its own, but
  the step log counts GRPO groups, as per-token-grpo does: ``groups_discarded`` is the
  number of GRPO groups (``num_generations`` entries of one prompt) with a rollout
  discarded, ``groups_waiting`` the GRPO groups played ahead.
* **Importance sampling.** The tokens carry the logprobs they were sampled with; TRL
  weights each token by ``pi_old / pi_sample`` (``trl_trainer``), truncated at the cap.
* ``K = 0`` plays step ``s`` after update ``s - 1``: the synchronous run, the same
  prompts in the same order.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

from agentsgym import TrajectoryBatch
from agentsgym.errors import TrainerOptionError
from agentsgym.runtime import RolloutSource
from agentsgym_trl.rollout_stream import AdmissionRecords, RolloutStream
from agentsgym_trl.step_rows import StepRows
from agentsgym_trl.trl_prompt_plan import PlanCursor, PlannedSampler

if TYPE_CHECKING:
    from agentsgym import Agent

logger = logging.getLogger(__name__)


def check_one_trained_role(source: RolloutSource) -> None:
    """TRL takes one completion per prompt entry: refuse, before anything plays, rows
    whose env trains several roles (a group each), saying what to do."""
    seen: set[tuple[str, str]] = set()
    for row in source.rows:
        if row.env_key() in seen:
            continue
        seen.add(row.env_key())
        roles = source.trained_roles_of(row)
        if roles is not None and len(roles) > 1:
            raise TrainerOptionError(several_roles(row.env_class_path, roles))


def check_one_group_per_prompt(batch: TrajectoryBatch, prompts: int) -> None:
    """What :func:`check_one_trained_role` checked, held by each played batch."""
    if len(batch.groups) == prompts:
        return
    roles = tuple(dict.fromkeys(str(group.role) for group in batch.groups))
    raise TrainerOptionError(several_roles(batch.groups[0].env_id, roles))


def several_roles(env_id: str, roles: tuple[str, ...]) -> str:
    """Why trl-grpo refuses an env that trains several roles, and what to do."""
    first = json.dumps([roles[0]])
    return (
        f"trl-grpo gives TRL one completion per prompt, but {env_id} trains several roles "
        f"({', '.join(roles)}), a group each. Train one role with trl-grpo: "
        f"--env-config trainable_roles='{first}' (env_config {{\"trainable_roles\": "
        f"{first}}} in rows; the policy still plays every role), or give the others an "
        "agent of their own (--agent ROLE=NAME); or train every role with per-token-grpo"
    )


def step_rows(prompts: list[Any], step: int | None = None) -> list[Any]:
    """TRL's prompt entries as the dataset rows they hold, keeping their step (the
    prompts' own, as a planned step's are, or ``step``)."""
    rows = [json.loads(p) if isinstance(p, str) else p for p in prompts]
    step = getattr(prompts, "step", step)
    return rows if step is None else StepRows(rows, step=step)


def check_streamable(trainer: Any) -> None:
    """The stream counts one optimizer step per generation round on one process."""
    args = trainer.args
    rounds = {
        "num_iterations": getattr(args, "num_iterations", 1),
        "steps_per_generation": getattr(args, "steps_per_generation", 1) or 1,
        "gradient_accumulation_steps": args.gradient_accumulation_steps,
    }
    other = {name: value for name, value in rounds.items() if value != 1}
    if other:
        listed = ", ".join(f"{name}={value}" for name, value in other.items())
        raise TrainerOptionError(
            f"trl-grpo --async trains one optimizer step per generation round, but {listed}; "
            "drop those options, or drop --async"
        )
    if trainer.accelerator.num_processes != 1:
        raise TrainerOptionError(
            "trl-grpo --async plays from one process; run it without a distributed launcher, "
            "or drop --async"
        )


class StreamedRollouts:
    """The stream behind ``trl-grpo``'s ``rollout_func`` (see the module docstring).

    :param policy: ``policy(trainer)``: the trainer's own versioned policy agent.
    :param agent: the agent that plays instead, if one was given.
    """

    def __init__(
        self,
        source: RolloutSource,
        *,
        max_staleness: int,
        max_steps: int,
        policy: Callable[[Any], Agent],
        agent: Agent | None = None,
    ) -> None:
        if max_staleness < 0:
            raise TrainerOptionError(f"max_staleness must be >= 0, got {max_staleness}")
        self.source = source  # plays the trials (and records them, in `agentsgym train`)
        self.max_staleness = max_staleness
        self.max_steps = max_steps
        self._policy = policy
        self._agent = agent
        self._player: Agent | None = None
        self._own: Any = None
        self.stream: RolloutStream | None = None
        self._cursor: PlanCursor | None = None
        self._played: dict[int, TrajectoryBatch] = {}
        self._lock = threading.Lock()
        self._held = contextlib.ExitStack()

    # ------------------------------------------------------------------ the rollout side
    def take(
        self, prompts: list[Any], trainer: Any
    ) -> tuple[TrajectoryBatch, TrajectoryBatch, dict[str, float]]:
        """The batch of the step TRL is on, for ``prompts``: one group per prompt entry
        (a discarded group left without trials), the admitted groups, and the stream's
        figures. From here until it waits for the next step's batch, the trainer holds
        the policy's weights."""
        step = int(trainer.state.global_step) + 1
        if self.stream is None:
            self._start(trainer, step)
        assert self.stream is not None and self._cursor is not None
        self._held.close()  # the policy generates while the trainer waits
        streamed = self.stream.take(step)
        if self._own is not None:
            self._held.enter_context(self._own.updating_weights(step))
        rows = self._cursor.taken.pop(step)
        with self._lock:
            played = self._played.pop(id(rows))
        if rows != list(prompts):
            raise TrainerOptionError(
                f"trl-grpo --async played other prompts for step {step} than TRL asks for "
                "(TRL's sampling order is not the one planned: an unsupported TRL version?); "
                "drop --async"
            )
        kept = {id(group) for group in streamed.batch.groups}
        filled = TrajectoryBatch(
            [g if id(g) in kept else dataclasses.replace(g, trials=[]) for g in played.groups]
        )
        return filled, streamed.batch, in_grpo_groups(streamed.metrics, played, kept, trainer)

    def step_done(self, global_step: int) -> None:
        """The optimizer step to ``global_step`` is done: the stream may play further
        (its replies wait for the weights until the trainer waits for a batch)."""
        if self.stream is not None:
            self.stream.advance(global_step)

    def close(self) -> None:
        self._held.close()
        if self.stream is not None:
            self.stream.close()

    # ------------------------------------------------------------------ internals
    def _start(self, trainer: Any, first_step: int) -> None:
        """Start playing at ``first_step`` (after TRL loaded any checkpoint it resumes)."""
        plan = getattr(trainer, "prompt_plan", None)
        if not isinstance(plan, PlannedSampler):
            raise TrainerOptionError(
                "trl-grpo --async needs the trainer's planned sampler (build the trainer "
                "with max_staleness)"
            )
        plan.start_at(first_step - 1)
        self._cursor = PlanCursor(plan, first_step)
        if self._agent is not None:
            self._player = self._agent
        else:
            self._player = self._own = self._policy(trainer)
        self.stream = RolloutStream(
            self._cursor,  # type: ignore[arg-type]  # a source of rows: next_rows, state_dict
            self._player,
            max_staleness=self.max_staleness,
            first_step=first_step,
            last_step=self.max_steps,
            play=self._play,
            records=self.source if isinstance(self.source, AdmissionRecords) else None,
        )
        self.stream.__enter__()

    def _play(self, prompts: list[str]) -> TrajectoryBatch:
        """Play each prompt entry as one trial (the synchronous run's way)."""
        assert self._player is not None
        rows = step_rows(prompts)
        batch = self.source.play(rows, self._player, num_rollouts=1)
        check_one_group_per_prompt(batch, len(rows))
        with self._lock:
            self._played[id(prompts)] = batch
        return batch


def in_grpo_groups(
    metrics: dict[str, float], played: TrajectoryBatch, kept: set[int], trainer: Any
) -> dict[str, float]:
    """The stream's figures counted in GRPO groups, not prompt entries: TRL groups
    ``num_generations`` consecutive entries (those of one prompt) in a step."""
    size = int(trainer.num_generations)
    discarded = {i // size for i, group in enumerate(played.groups) if id(group) not in kept}
    return {
        **metrics,
        "groups_discarded": float(len(discarded)),
        "groups_waiting": metrics["groups_waiting"] / size,
    }


class StreamCallback(TrainerCallback):  # type: ignore[misc]
    """Ends each step for the stream: new weights, new version, more steps may play."""

    def __init__(self, rollouts: StreamedRollouts) -> None:
        self.rollouts = rollouts

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.rollouts.step_done(int(state.global_step))
