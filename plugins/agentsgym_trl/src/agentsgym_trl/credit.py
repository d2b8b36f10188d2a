"""Credit assignment: which turns a reward reinforces, as per-token advantages.

The runner records, per step, the reward the env paid for that action
(``StepRecord.reward``) and how many tokens the action has
(``StepRecord.num_agent_tokens``); the agent tokens of an episode, read segment by
segment, are the actions' tokens in order. From those, ``per-token-grpo`` gives every
token of turn ``t`` the same *score*:

* ``"return_to_go"`` (default): the discounted return ``G_t = r_t + gamma * G_{t+1}``,
  everything the episode earned from that turn on. With ``gamma=1`` and an outcome
  reward (paid at the end) every turn is credited with the outcome, so a winning
  first move is not mistaken for a losing one; ``gamma < 1`` credits a turn more with
  what followed it soon than with what came much later.
* ``"turn"``: the turn's own reward ``r_t`` only (immediate credit). Right when each
  turn's reward judges that turn alone (per-question scores, format rewards) and
  later outcomes do not depend on it.
* ``"episode"``: the episode's final reward on every turn (the GRPO outcome
  objective, as ``trl-grpo`` uses).
* ``"token_rewards"``: the env's ``per_token_rewards`` as its ``reward_strategy``
  placed them (``spread`` divides a step reward by the reply's length, so short
  replies get larger per-token values: the length bias of the first version of this
  trainer, kept for comparison).

Scores become advantages within each group (the rollouts of one task):
``"group"`` subtracts the group's mean and divides by its standard deviation,
``"mean"`` only subtracts the mean, ``"none"`` uses the scores as they are. The
statistics are taken over *units*, each counted once whatever its length: turns
(for the turn-level credits) or episodes (``"episode"``), agent tokens for
``"token_rewards"``. A long reply therefore does not pull the baseline towards its
own score, and every token of a turn carries the turn's full advantage (not a share
of it).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Literal, get_args

import numpy as np

from agentsgym import Episode
from agentsgym.errors import TokenFidelityError, TrainerOptionError
from agentsgym.runtime import discounted_returns

CreditAssignment = Literal["return_to_go", "turn", "episode", "token_rewards"]
Normalization = Literal["group", "mean", "none"]


def check_credit_options(credit: str, gamma: float, normalization: str) -> None:
    """Raise a :class:`~agentsgym.errors.TrainerOptionError` for a bad value."""
    if credit not in get_args(CreditAssignment):
        raise TrainerOptionError(
            f"credit_assignment must be one of {', '.join(get_args(CreditAssignment))}, "
            f"got {credit!r}"
        )
    if normalization not in get_args(Normalization):
        raise TrainerOptionError(
            f"advantage_normalization must be one of {', '.join(get_args(Normalization))}, "
            f"got {normalization!r}"
        )
    if not 0.0 <= gamma <= 1.0:
        raise TrainerOptionError(f"gamma must be in [0, 1], got {gamma}")


def agent_token_steps(episode: Episode, segment: int) -> np.ndarray:
    """The step index of every agent token of ``episode.segments[segment]``, in order."""
    counts = [step.num_agent_tokens for step in episode.steps]
    owners = np.repeat(np.arange(len(counts)), counts)
    if len(owners) != episode.num_agent_tokens:
        raise TokenFidelityError(
            f"{episode.session_id}: its steps account for {len(owners)} agent tokens but its "
            f"segments hold {episode.num_agent_tokens}"
        )
    start = sum(s.num_agent_tokens for s in episode.segments[:segment])
    return owners[start : start + episode.segments[segment].num_agent_tokens]


def turn_scores(episode: Episode, credit: CreditAssignment, gamma: float = 1.0) -> list[float]:
    """The score of every step of ``episode`` under a turn-level credit assignment."""
    rewards = [step.reward for step in episode.steps]
    if credit == "return_to_go":
        return discounted_returns(rewards, gamma)
    if credit == "turn":
        return rewards
    if credit == "episode":
        return [episode.final_reward] * len(rewards)
    raise TrainerOptionError(f"{credit!r} is not a turn-level credit assignment")


def _normalise(values: np.ndarray, units: np.ndarray, how: Normalization, eps: float) -> np.ndarray:
    if how == "none" or units.size == 0:
        return values
    centred = values - units.mean()
    if how == "mean":
        return centred
    return centred / (units.std() + eps)


def _units(
    rows: Sequence[tuple[Episode, int]],
    members: np.ndarray,
    mask: np.ndarray,
    per_token_rewards: np.ndarray,
    credit: CreditAssignment,
    gamma: float,
) -> tuple[dict[int, Episode], dict[int, np.ndarray], dict[int, np.ndarray]]:
    """(episodes, per-step scores, units) of the rows ``members``, keyed by ``id()``."""
    episodes = {id(rows[row][0]): rows[row][0] for row in members}
    scores: dict[int, np.ndarray] = {}
    units: dict[int, np.ndarray] = {}
    for key, episode in episodes.items():
        if credit == "token_rewards":
            values = [
                per_token_rewards[row][mask[row]] for row in members if rows[row][0] is episode
            ]
            units[key] = np.concatenate(values).astype(np.float64)
            continue
        scores[key] = np.asarray(turn_scores(episode, credit, gamma), dtype=np.float64)
        if credit == "episode":
            units[key] = np.asarray([episode.final_reward], dtype=np.float64)
        else:
            counted = [i for i, step in enumerate(episode.steps) if step.num_agent_tokens]
            units[key] = scores[key][counted]
    return episodes, scores, units


def advantages(
    rows: Sequence[tuple[Episode, int]],
    group_indices: np.ndarray,
    agent_mask: np.ndarray,
    per_token_rewards: np.ndarray,
    *,
    credit: CreditAssignment = "return_to_go",
    gamma: float = 1.0,
    normalization: Normalization = "group",
    eps: float = 1e-4,
    failed: Collection[int] = (),
    failure_score: Callable[[Iterable[float]], float] | None = None,
) -> np.ndarray:
    """``(B, T)`` advantages of padded rows (``rows[i]`` is the (episode, segment) of
    row ``i``); exactly 0 wherever ``agent_mask`` is 0. See the module docstring.

    :param failed: ``id()`` of episodes that count as failures whatever they earned
        (episodes masked for a truncated reply, see
        :mod:`agentsgym_trl.screening`): every score of theirs is the lowest
        score of the batch, or what ``failure_score`` makes of the batch's scores
        (:meth:`~agentsgym_trl.screening.RolloutScreen.failure_score`: the
        lowest of the run).
    """
    check_credit_options(credit, gamma, normalization)
    mask = agent_mask.astype(bool)
    out = np.zeros(agent_mask.shape, dtype=np.float64)
    groups = [np.flatnonzero(group_indices == g) for g in np.unique(group_indices)]
    found = [_units(rows, m, mask, per_token_rewards, credit, gamma) for m in groups]
    every = np.concatenate(
        [u for _, _, units in found for u in units.values() if u.size] or [np.zeros(0)]
    )
    if failure_score is not None:
        floor = failure_score(every.tolist())
    else:
        floor = float(every.min()) if every.size else 0.0
    for members, (episodes, scores, units) in zip(groups, found):
        for key in episodes:
            if key in failed:
                units[key] = np.full_like(units[key], floor)
                if key in scores:
                    scores[key] = np.full_like(scores[key], floor)
        stats = np.concatenate(list(units.values())) if units else np.zeros(0)
        for row in members:
            episode, segment = rows[row]
            positions = np.flatnonzero(mask[row])
            if credit == "token_rewards":
                values = per_token_rewards[row][mask[row]].astype(np.float64)
                if id(episode) in failed:
                    values = np.full_like(values, floor)
            else:
                steps = agent_token_steps(episode, segment)
                if len(steps) != len(positions):
                    raise TokenFidelityError(
                        f"{episode.session_id} segment {segment}: {len(positions)} agent "
                        f"tokens in the padded row but {len(steps)} in the segment"
                    )
                values = scores[id(episode)][steps]
            out[row, positions] = _normalise(values, stats, normalization, eps)
    return out.astype(np.float32)
