"""run_trial with a real chat tokenizer: per-token rewards, masks and padded groups."""

from __future__ import annotations

import itertools
import math
import threading
from typing import Any

import pytest

import agentsgym
from agentsgym_twentyq.questioner import ReferenceQuestioner
from twentyq_testutil import BASIC

FILLER = "Is it bigger than a breadbox?"  # the rules gamemaster cannot decide it


class Dawdler:
    """Wastes ``trial % 3 * 2`` turns before playing well; trial 3k+2 never stops.

    So the rollouts of one task differ in length (the group needs padding) and
    include a loss by running out of turns.
    """

    def __init__(self) -> None:
        self.trials = itertools.count()
        self.lock = threading.Lock()
        self.player = ReferenceQuestioner()

    def get_action(self, messages: list[dict[str, str]], state: Any) -> tuple[str, Any]:
        if state is None:
            with self.lock:
                state = next(self.trials) % 3
        asked = sum(m["role"] == "assistant" for m in messages)
        if state == 2 or asked < 2 * state:
            return FILLER, state
        return self.player.get_action(messages, state)[0], state


def _check_episode(env: Any, episode: Any) -> None:
    tok = env.tokenizer
    ids, mask, rewards = episode.full_token_ids, episode.agent_token_mask, episode.per_token_rewards
    assert len(ids) == len(mask) == len(rewards)
    # rewards only on agent tokens, summing to the episode reward
    assert all(r == 0.0 for r, m in zip(rewards, mask) if m == 0)
    assert math.isclose(sum(rewards), episode.final_reward, abs_tol=1e-6)  # float32 per token
    # the agent tokens are exactly the replies, each closed by the template's <|im_end|>
    replies = [m["content"] for m in episode.messages if m["role"] == "assistant"]
    agent_text = tok.decode([i for i, m in zip(ids, mask) if m])
    assert agent_text == "".join(f"{r}<|im_end|>" for r in replies)
    # the stream is the chat template's rendering of the conversation
    rendered = tok.apply_chat_template(episode.messages, tokenize=False)
    assert ids == tok(rendered, add_special_tokens=False)["input_ids"]
    # a win rewards the guess's tokens only (spread strategy)
    if episode.final_reward:
        last_turn = episode.steps[-1].num_agent_tokens
        rewarded = [i for i, r in enumerate(rewards) if r]
        agent_positions = [i for i, m in enumerate(mask) if m]
        assert rewarded == agent_positions[-last_turn:]


def test_run_trial_with_a_real_tokenizer(qwen_tokenizer: Any) -> None:
    env = agentsgym.make(BASIC, tokenizer=qwen_tokenizer, env_config={"max_steps_per_episode": 12})
    tasks = [{"solution": "yo-yo", "seed": 0}, {"solution": "TV presenter", "seed": 1}]
    batch = env.run_trial(tasks, Dawdler(), num_rollouts=3)
    assert not batch.failed, batch.failed[0].error
    assert sorted(batch.final_rewards) == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    for group in batch.groups:
        lengths = [e.num_tokens for e in group.episodes]
        assert len(set(lengths)) > 1, "rollouts should differ in length"
        width = max(lengths)
        for episode, ids, mask, rewards in zip(
            group.episodes,
            group.padded_full_token_ids,
            group.padded_agent_token_mask,
            group.padded_per_token_rewards,
        ):
            _check_episode(env, episode)
            n = episode.num_tokens
            assert len(ids) == len(mask) == len(rewards) == width
            assert ids[:n] == episode.full_token_ids
            assert ids[n:] == [env.chat.pad_token_id] * (width - n)
            assert not any(mask[n:]) and not any(rewards[n:])
    lost = [e for e in batch.episodes if e.final_reward == 0.0]
    assert all(e.num_turns == 12 and not e.truncated and e.steps[-1].done for e in lost)
    assert all(sum(e.per_token_rewards) == 0.0 for e in lost)


def test_last_token_strategy_puts_the_reward_on_the_final_token(qwen_tokenizer: Any) -> None:
    env = agentsgym.make(
        BASIC, tokenizer=qwen_tokenizer, env_config={"reward_strategy": "last_token"}
    )
    episode = env.run_trial([{"solution": "apple", "seed": 0}], ReferenceQuestioner(), 1).episodes[
        0
    ]
    rewards, mask = episode.per_token_rewards, episode.agent_token_mask
    last_agent = max(i for i, m in enumerate(mask) if m)
    assert [i for i, r in enumerate(rewards) if r] == [last_agent]
    assert rewards[last_agent] == 1.0
    assert qwen_tokenizer.decode([episode.full_token_ids[last_agent]]) == "<|im_end|>"


@pytest.mark.parametrize("free_shots", [1])
def test_free_shots_score_only_the_last_episode(qwen_tokenizer: Any, free_shots: int) -> None:
    env = agentsgym.make(
        BASIC,
        tokenizer=qwen_tokenizer,
        env_config={"episodes_per_trial": 2, "free_shots": free_shots},
    )
    batch = env.run_trial([{"solution": "apple", "seed": 0}], ReferenceQuestioner(), 1)
    first, second = batch.all_episodes
    assert first.free_shot and first.final_reward == 0.0 and sum(first.per_token_rewards) == 0.0
    assert first.metrics["raw_final_reward"] == 1.0
    assert not second.free_shot and second.final_reward == 1.0
