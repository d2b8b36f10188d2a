"""Tokens beyond the staleness bound are left out of the loss, token by token, in both
trainers' batches (agentsgym_trl.staleness), and counted."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import agentsgym
from agentsgym import AgentAction
from agentsgym_trl.per_token_batch import batch_arrays
from agentsgym_trl.screening import RolloutScreen
from agentsgym_trl.staleness import StalenessBound, stale_agent_tokens
from agentsgym_trl.trl_rollouts import rollouts_to_trl

TINY = "agentsgym/tiny-chatml"
GUESS = "agentsgym/GuessTheNumber-v0"


class SplitReplyAgent:
    """Guesses 1 then 2, token-in; each reply's first token was sampled by version 0 and
    the rest by version 2 (an engine updated twice while it generated)."""

    wants_prompt_token_ids = True

    def __init__(self) -> None:
        self.chat = agentsgym.runtime.ChatTokenizer(agentsgym.load_tokenizer(TINY))
        self.calls = 0

    def get_action(self, messages: Any, state: Any, prompt_token_ids: Any = None) -> Any:
        self.calls += 1
        ids = self.chat.encode_model_text(f"[{self.calls}]") + list(self.chat.eot_ids)
        versions = [0] + [2] * (len(ids) - 1)
        return AgentAction(f"[{self.calls}]", ids, policy_versions=versions), state


@pytest.fixture
def batch() -> Any:
    env = agentsgym.make(GUESS, tokenizer=TINY, env_config={"high": 3, "max_steps_per_episode": 2})
    task = env.get_train_dataset()[0]["task_data"]
    return env.run_trial([task, task], SplitReplyAgent())


def test_the_bound_counts_only_known_versions_older_than_it() -> None:
    bound = StalenessBound(version=3, max_staleness=1)
    versions = np.array([-1, 0, 1, 2, 3])
    assert bound.stale(versions).tolist() == [False, True, True, False, False]


def test_per_token_grpo_masks_each_stale_token_out_of_the_loss(batch: Any) -> None:
    episodes = [e for g in batch.groups for e in g.episodes]
    replies = sum(len(e.steps) for e in episodes)
    common = {"multi_turn": None, "credit": "episode", "gamma": 1.0, "normalization": "none"}
    fresh, counts = batch_arrays(batch, RolloutScreen(trainer="t"), **common)
    assert "stale_tokens_masked" not in counts
    bound = StalenessBound(version=2, max_staleness=1)
    masked, counts = batch_arrays(batch, RolloutScreen(trainer="t"), **common, bound=bound)
    assert counts["stale_tokens_masked"] == replies  # the first token of every reply
    removed = fresh["loss_mask"].astype(bool) & ~masked["loss_mask"].astype(bool)
    assert int(removed.sum()) == replies
    versions = batch.padded_arrays()["policy_versions"][:, : removed.shape[1]]
    assert set(versions[removed].tolist()) == {0}
    assert stale_agent_tokens(episodes, bound) == replies


def test_trl_grpo_masks_each_stale_token_like_an_env_token(batch: Any) -> None:
    bound = StalenessBound(version=2, max_staleness=1)
    fresh, _ = rollouts_to_trl(batch, 0)
    masked, _ = rollouts_to_trl(batch, 0, bound=bound)
    replies = sum(len(e.steps) for g in batch.groups for e in g.episodes)
    trained_before = sum(sum(m) for m in fresh["env_mask"])
    trained_after = sum(sum(m) for m in masked["env_mask"])
    assert trained_before - trained_after == replies
