"""How agentsgym rollouts become the completions of TRL's ``rollout_func``.

TRL's supported path for multi-turn environments is a ``rollout_func``
(``GRPOTrainer(..., rollout_func=f)``, TRL >= 0.26; checked against 1.13 and 1.16):

    rollout_func(prompts: list, trainer: GRPOTrainer) -> {
        "prompt_ids":     list[list[int]],    # one per prompt
        "completion_ids": list[list[int]],
        "logprobs":       list[list[float]] | None,   # sampling logprobs per completion token
        "env_mask":       list[list[int]],    # 1 = model token (trained), 0 = env token
        ...                                   # any other key goes to the reward functions
    }

``prompts`` is this process's slice of the generation batch, each dataset prompt
repeated ``num_generations`` times (TRL's ``RepeatSampler``), and one completion is
returned per entry. TRL treats ``env_mask`` as its tool mask: the loss mask is
``completion_mask * env_mask``, so environment tokens never enter the loss.

How an agentsgym rollout becomes TRL completions:

* the dataset prompt is the JSON of a dataset row ``{env_class_path, env_config,
  task_data}``; each prompt entry is played as one trial by the runner;
* ``prompt_ids`` are the episode's tokens before the agent's first token (the first
  prompt, exactly as the model saw it); ``completion_ids`` is everything after,
  through the agent's last token: its replies (mask 1) and the env turns between
  them (mask 0), token for token as the episode holds them;
* an episode that a chat template which is not prefix-preserving split into several
  views gives one completion per view, each with the episode's advantage: the last
  view is the entry's completion, the earlier ones are extra rows
  (:class:`ExtraView`, trained by :mod:`agentsgym_trl.trl_trainer`). Every agent
  token is trained once. ``--chat-template training`` (TRL's prefix-preserving
  training templates) keeps such episodes in one view instead;
* ``logprobs`` are the sampled logprobs of the agent tokens (0.0 on env tokens,
  which the mask removes; ``None`` for an agent token whose logprob is unknown);
  ``None`` when no agent returned any. TRL's importance-sampling correction then
  uses them whatever sampled them (see :mod:`agentsgym_trl.trl_trainer`);
* the reward function returns the episode's ``final_reward`` as the sequence reward;
  TRL normalises it within each group of ``num_generations`` rollouts of a task. A
  failed episode becomes a one-token, fully masked completion whose reward is
  ``None``, so TRL gives it advantage 0;
* an episode with a reply cut at the length limit is masked out of the loss and
  counts as a failure (the lowest reward of the run) in its group's baseline, by
  default in multi-turn envs (``mask_truncated_completions``, see
  :mod:`agentsgym_trl.screening`); steps re-tokenized from text are trained
  with a warning by default (``on_retokenized``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentsgym import Episode, TrajectoryBatch
from agentsgym_trl.screening import RolloutScreen
from agentsgym_trl.staleness import StalenessBound

REWARD_FIELD = "agentsgym_final_reward"


@dataclass
class View:
    """One view of an episode as a TRL completion (see the module docstring)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float | None] | None
    """Sampled logprobs: a float on agent tokens whose logprob is known, ``None`` on
    agent tokens whose logprob is unknown, 0.0 on env tokens; ``None`` altogether
    when the episode has none."""


@dataclass
class ExtraView:
    """An earlier view of a split episode, trained with the advantage of TRL row ``row``."""

    row: int
    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float | None] | None


def episode_views(episode: Episode, bound: StalenessBound | None = None) -> list[View]:
    """Every view of a finished episode that holds agent tokens, in order.

    One view unless a chat template that is not prefix-preserving split the episode.
    Each view's prompt is its tokens before its first agent token; its completion runs
    from there through its last agent token. Agent tokens older than ``bound`` are
    masked like env tokens (:mod:`agentsgym_trl.staleness`).
    """
    views = []
    for index, segment in enumerate(episode.segments):
        agent = np.flatnonzero(segment.agent_mask)
        if not agent.size:
            continue
        first, last = int(agent[0]), int(agent[-1])
        ids = segment.token_ids.tolist()
        trained = segment.agent_mask[first : last + 1].astype(bool)
        if bound is not None:
            trained &= ~bound.stale(episode.token_policy_versions(index)[first : last + 1])
        mask = trained.astype(int).tolist()
        logprobs: list[float | None] | None = None
        if episode.has_logprobs and segment.logprobs is not None:
            values = segment.logprobs[first : last + 1].tolist()
            logprobs = [(None if math.isnan(v) else v) if m else 0.0 for v, m in zip(values, mask)]
        views.append(View(ids[:first], ids[first : last + 1], mask, logprobs))
    return views


def episode_completion(episode: Episode) -> tuple[list[int], list[int], list[int], list[float]]:
    """(prompt_ids, completion_ids, env_mask, logprobs) of an episode's last view
    (logprobs 0.0 where unknown)."""
    view = episode_views(episode)[-1]
    logprobs = view.logprobs or [0.0] * len(view.completion_ids)
    return (
        view.prompt_ids,
        view.completion_ids,
        view.env_mask,
        [0.0 if x is None else x for x in logprobs],
    )


def rollouts_to_trl(
    batch: TrajectoryBatch,
    pad_token_id: int,
    *,
    screen: RolloutScreen | None = None,
    multi_turn: Callable[[Episode], bool] | None = None,
    bound: StalenessBound | None = None,
) -> tuple[dict[str, Any], list[ExtraView]]:
    """TRL ``rollout_func`` output for a batch played with one trial per group, and
    the earlier views of split episodes (extra rows, see :class:`ExtraView`).

    Group ``i`` (one prompt entry) gives completion ``i``: its episode's last view.
    ``screen`` applies the re-tokenized and truncation policies (default: warn about
    re-tokenized data; mask episodes with a truncated reply, in multi-turn envs as
    ``multi_turn`` tells, default all). ``bound``: tokens older than it are masked.
    """
    screen = screen if screen is not None else RolloutScreen(trainer="trl-grpo")
    multi_turn = multi_turn if multi_turn is not None else (lambda _episode: True)
    prompt_ids: list[list[int]] = []
    completion_ids: list[list[int]] = []
    env_mask: list[list[int]] = []
    logprobs: list[list[float | None]] = []
    rewards: list[float | None] = []
    extra: list[ExtraView] = []
    episodes: list[Episode | None] = []
    for group in batch.groups:
        trial = group.trials[0] if group.trials else []
        usable = bool(trial) and all(e.ok for e in trial) and trial[-1].num_agent_tokens > 0
        episodes.append(trial[-1] if usable else None)
    dropped = screen.dropped(e for e in episodes if e is not None)
    # A cut episode counts as a failure: the lowest reward seen (see screening).
    floor = screen.failure_score(
        e.final_reward for e in episodes if e is not None and id(e) not in dropped
    )
    any_logprobs = False
    for row, episode in enumerate(episodes):
        if episode is None or id(episode) in dropped:
            prompt_ids.append([pad_token_id])
            completion_ids.append([pad_token_id])
            env_mask.append([0])
            logprobs.append([0.0])
            rewards.append(None)
            continue
        views = episode_views(episode, bound)
        reward = episode.final_reward
        if screen.masks(episode, multi_turn):
            views = [
                View(v.prompt_ids, v.completion_ids, [0] * len(v.env_mask), v.logprobs)
                for v in views
            ]
            reward = floor
        *earlier, last = views
        extra += [
            ExtraView(row, v.prompt_ids, v.completion_ids, v.env_mask, v.logprobs) for v in earlier
        ]
        prompt_ids.append(last.prompt_ids)
        completion_ids.append(last.completion_ids)
        env_mask.append(last.env_mask)
        if last.logprobs is not None:
            any_logprobs = True
            logprobs.append(last.logprobs)
        else:
            logprobs.append([None if m else 0.0 for m in last.env_mask])
        rewards.append(reward)
    output = {
        "prompt_ids": prompt_ids,
        "completion_ids": completion_ids,
        "logprobs": logprobs if any_logprobs else None,
        "env_mask": env_mask,
        REWARD_FIELD: rewards,
    }
    return output, extra


def rewards_by_prompt(prompts: list[Any], batch: TrajectoryBatch) -> dict[str, list[float]]:
    """The final rewards of each prompt's rollouts: TRL's GRPO groups. (TRL repeats a
    prompt once per generation and each entry is played as a group of one, so the
    batch's own groups are not GRPO's.)"""
    rewards: dict[str, list[float]] = {}
    for prompt, group in zip(prompts, batch.groups):
        key = prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True)
        rewards.setdefault(key, []).extend(e.final_reward for e in group.episodes)
    return rewards


def pad_token_id(tokenizer: Any) -> int:
    """The pad id of batches: the tokenizer's pad token, else its EOS (Llama 3.2 has no
    pad token and pads with ``<|eot_id|>``; masks tell padding apart), else 0."""
    for candidate in (tokenizer.pad_token_id, tokenizer.eos_token_id):
        if candidate is not None:
            return int(candidate)
    return 0


def final_reward(completions: list[Any], **kwargs: Any) -> list[float | None]:
    """The reward function: each rollout's ``final_reward`` (``None`` if it failed)."""
    return list(kwargs[REWARD_FIELD])
