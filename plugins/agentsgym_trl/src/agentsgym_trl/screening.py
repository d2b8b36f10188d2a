"""Which rollouts a trainer learns from: token sources and truncated replies.

Every step of an episode records where its token ids came from
(``StepRecord.token_source``):

* ``"sampled"``: ids a token-in agent generated from the episode's own prompt ids
  (the transformers agent, the openai agent with ``api="completions"``);
* ``"server"``: ids a chat server generated, with the prompt ids it conditioned on
  checked against the episode's stream;
* ``"unchecked"``: sampled ids without the prompt they were sampled from;
* ``"retokenized"``: the agent returned text only and the runner tokenized it. The
  model may have generated other ids (and conditioned on another rendering), so the
  trajectory is a plausible reconstruction, not what the model saw.

:class:`RolloutScreen` applies a trainer's policy for re-tokenized data
(``on_retokenized``):

* ``"warn"`` (default): train on it, log a warning naming how much of the batch it
  is and what to do about it;
* ``"error"``: refuse the batch with a :class:`~agentsgym.errors.TokenFidelityError`;
* ``"drop"``: leave those episodes out of the batch (no gradient, not in the
  group's baseline);
* ``"allow"``: train on it silently.

It also applies the truncation policy (``mask_truncated_completions``): an episode
in which a reply was cut at the generation length limit
(``StepRecord.reply_truncated``) gives no gradient, and counts as a failure in its
group's baseline: it scores the lowest score the trainer has seen in this run
(:meth:`RolloutScreen.failure_score`), whatever the env paid.
Such a reply never ended its turn, and in a multi-turn env the env answered a
cut-off text. Masking alone keeps it from being reinforced but lets it spread: a
policy that runs to the length limit while the env still pays then scores as well
as one that ends its turns, and nothing teaches it to stop (see bench/README.md).
Counted as a failure, it ranks below the rollouts of its group that ended their
turns, and level with those that failed (a fixed penalty instead would push a
group's honest failures up, and measurably collapsed a run onto a wrong answer).
The lowest score of the run rather than of the batch: once a policy wins every game,
a batch holds no failure to compare with, and cut replies would go on unchecked.
``None`` (default) masks for multi-turn envs (``max_steps_per_episode > 1``) and not
for single-turn ones, where TRL's default (no masking) applies.

:func:`reward_signal` counts the groups a step can learn from at all: GRPO's
advantages are rewards relative to the group, so a group whose rollouts all scored
the same gives every token advantage 0, and a step made only of such groups leaves
the policy where it was (whatever else it logs).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Literal, get_args

from agentsgym import Episode
from agentsgym.errors import TokenFidelityError, TrainerOptionError

logger = logging.getLogger(__name__)

RetokenizedPolicy = Literal["warn", "error", "drop", "allow"]
RETOKENIZED = "retokenized"


def retokenized_steps(episode: Episode) -> int:
    """How many of the episode's steps were re-tokenized from text."""
    return sum(1 for step in episode.steps if step.token_source == RETOKENIZED)


def has_truncated_reply(episode: Episode) -> bool:
    """Whether any reply of the episode was cut at the generation length limit."""
    return any(step.reply_truncated for step in episode.steps)


def reward_signal(groups: Iterable[Iterable[float]]) -> dict[str, float]:
    """Step-log counts of a step's groups (each given as its rollouts' final rewards):
    ``groups`` (groups with at least one scored rollout) and ``groups_with_signal``
    (those whose rollouts got different rewards, the only ones with a nonzero
    advantage; see the module docstring)."""
    scored = [set(rewards) for rewards in groups]
    scored = [rewards for rewards in scored if rewards]
    return {
        "groups": float(len(scored)),
        "groups_with_signal": float(sum(len(rewards) > 1 for rewards in scored)),
    }


class RolloutScreen:
    """A trainer's policies for re-tokenized data and truncated replies.

    :param on_retokenized: ``"warn"``, ``"error"``, ``"drop"`` or ``"allow"`` (see
        the module docstring).
    :param mask_truncated_completions: ``True``/``False``, or ``None`` for multi-turn
        envs only.
    :param trainer: the trainer's name, for messages.
    """

    def __init__(
        self,
        on_retokenized: RetokenizedPolicy = "warn",
        mask_truncated_completions: bool | None = None,
        *,
        trainer: str = "trainer",
    ) -> None:
        if on_retokenized not in get_args(RetokenizedPolicy):
            raise TrainerOptionError(
                f"{trainer}: on_retokenized must be one of "
                f"{', '.join(get_args(RetokenizedPolicy))}, got {on_retokenized!r}"
            )
        if mask_truncated_completions not in (None, True, False):
            raise TrainerOptionError(
                f"{trainer}: mask_truncated_completions must be true, false or unset, got "
                f"{mask_truncated_completions!r}"
            )
        self.on_retokenized: RetokenizedPolicy = on_retokenized
        self.mask_truncated = mask_truncated_completions
        self.trainer = trainer
        self._warned = False
        self._lowest: float | None = None

    def failure_score(self, scores: Iterable[float]) -> float:
        """The score a masked episode takes: the lowest of ``scores`` (this batch's)
        and of every batch before."""
        for score in scores:
            if self._lowest is None or score < self._lowest:
                self._lowest = float(score)
        return 0.0 if self._lowest is None else self._lowest

    def dropped(self, episodes: Iterable[Episode]) -> set[int]:
        """``id()`` of the episodes to leave out entirely (``on_retokenized="drop"``);
        raises for ``"error"``, warns once per run for ``"warn"``."""
        affected = [e for e in episodes if retokenized_steps(e)]
        if not affected or self.on_retokenized == "allow":
            return set()
        steps = sum(retokenized_steps(e) for e in affected)
        advice = (
            "the agent returned text only, so the runner tokenized it and the model may "
            "have seen other tokens. Use an agent that returns its sampled ids: the "
            "transformers agent, or the openai agent with api='completions' (token-in), or "
            "a chat server that returns prompt_token_ids (vLLM with return_token_ids)"
        )
        if self.on_retokenized == "error":
            raise TokenFidelityError(
                f"{self.trainer}: {len(affected)} episode(s) of this batch hold {steps} "
                f"re-tokenized step(s): {advice}. Or pass on_retokenized=warn to train on "
                "them anyway (--trainer-option on_retokenized=warn)."
            )
        if self.on_retokenized == "drop":
            logger.info(
                "%s: leaving out %d episode(s) with re-tokenized steps", self.trainer, len(affected)
            )
            return {id(e) for e in affected}
        if not self._warned:
            self._warned = True
            logger.warning(
                "%s trains on %d episode(s) with %d re-tokenized step(s) (this warning is "
                "shown once; the step log counts them under token_source/retokenized): %s. "
                "on_retokenized=error refuses such data, on_retokenized=drop leaves it out.",
                self.trainer,
                len(affected),
                steps,
                advice,
            )
        return set()

    def masks(self, episode: Episode, multi_turn: Callable[[Episode], bool]) -> bool:
        """Whether ``episode`` keeps its reward for the baseline but gets no gradient
        (it holds a truncated reply and the truncation policy applies to it)."""
        if not has_truncated_reply(episode):
            return False
        if self.mask_truncated is None:
            return multi_turn(episode)
        return self.mask_truncated
