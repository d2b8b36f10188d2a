"""The runner: episodes, trials, padding, rewards, failures and concurrency."""

from __future__ import annotations

import math

import pytest

import agentsgym
from agentsgym.errors import TokenizerRequiredError
from envs_for_tests import CountdownEnv, CountingAgent, countdown

TINY = "agentsgym/tiny-chatml"


def test_complete_episode_returns_unpadded_fields_that_agree() -> None:
    env = countdown(TINY)
    session = env.new_session({"start": 2})
    episode = env._run_complete_episode(session, CountingAgent())
    assert episode.ok and episode.num_turns == 2
    n = len(episode.full_token_ids)
    assert n == len(episode.full_attention_mask) == len(episode.agent_token_mask)
    assert n == len(episode.per_token_rewards)
    assert set(episode.full_attention_mask) == {1}
    assert episode.final_reward == pytest.approx(0.5 + 0.5 + 1.0)
    assert [m["role"] for m in episode.messages] == [
        "system", "user", "assistant", "user", "assistant",
    ]
    assert [s.info["right"] for s in episode.steps] == [True, True]
    rewarded = [r for r, m in zip(episode.per_token_rewards, episode.agent_token_mask) if r]
    assert all(m == 1 for r, m in zip(episode.per_token_rewards, episode.agent_token_mask) if r)
    assert math.isclose(sum(rewarded), episode.final_reward)


def test_run_trial_pads_each_group_to_its_longest_rollout() -> None:
    env = countdown(TINY)
    episodes_started = iter(range(1000))

    def policy(messages, state):
        # every other rollout wastes its first turn, so rollouts of a task differ in length
        if state is None:
            state = {"waste": next(episodes_started) % 2 == 1}
        if state.pop("waste", False):
            return "no idea", state
        return messages[-1]["content"].split()[-1].rstrip("."), state

    agent = agentsgym.FunctionAgent(policy)
    batch = env.run_trial([{"start": 3}, {"start": 1}], agent, num_rollouts=3, max_concurrency=1)
    assert len(batch) == 6
    assert batch.group_indices == [0, 0, 0, 1, 1, 1]
    assert len(set(batch.session_ids)) == 6
    pad = env.tokenizer.pad_token_id
    for group in batch.groups:
        width = max(e.num_tokens for e in group.episodes)
        assert len({e.num_tokens for e in group.episodes}) == 2
        for ids, attn, mask, rewards, (episode, _) in zip(
            group.padded_full_token_ids, group.padded_full_attention_mask,
            group.padded_agent_token_mask, group.padded_per_token_rewards, group.rows,
        ):
            n = episode.num_tokens
            assert len(ids) == len(attn) == len(mask) == len(rewards) == width
            assert ids[:n] == episode.full_token_ids and ids[n:] == [pad] * (width - n)
            assert attn[n:] == [0] * (width - n) and mask[n:] == [0] * (width - n)
            assert rewards[n:] == [0.0] * (width - n)
    # groups are padded separately: task 1 needs fewer turns than task 0
    assert len(batch.groups[0].padded_full_token_ids[0]) > len(batch.groups[1].padded_full_token_ids[0])
    tensors = batch.to_torch()
    assert tensors["input_ids"].shape == (6, len(batch.groups[0].padded_full_token_ids[0]))
    assert tensors["final_rewards"].tolist() == batch.final_rewards


def test_without_tokenizer_episodes_play_but_token_fields_say_what_to_do() -> None:
    env = countdown(None)
    batch = env.run_trial([{"start": 2}], CountingAgent(), num_rollouts=2)
    assert batch.final_rewards == [2.0, 2.0]
    assert batch.final_completion_messages[0][-1] == {"role": "assistant", "content": "1"}
    with pytest.raises(TokenizerRequiredError, match="tokenizer"):
        batch.padded_full_token_ids
    with pytest.raises(TokenizerRequiredError):
        batch.episodes[0].full_token_ids


def test_truncation_at_max_steps() -> None:
    env = countdown(TINY, max_steps_per_episode=2)
    episode = env.run_trial([{"start": 5}], CountingAgent()).episodes[0]
    assert episode.truncated and episode.num_turns == 2 and episode.final_reward == 1.0


def test_a_failing_episode_is_recorded_and_the_batch_survives() -> None:
    env = countdown(TINY)

    def policy(messages, state):
        task_is_bad = "Say 9" in messages[1]["content"]
        return ("boom" if task_is_bad else messages[-1]["content"][-2]), state

    batch = env.run_trial([{"start": 9}, {"start": 1}], agentsgym.FunctionAgent(policy), 2)
    assert len(batch.failed) == 2
    assert all("the env exploded" in e.error for e in batch.failed)
    assert batch.group_indices == [1, 1]  # failed rollouts are not padded rows
    assert batch.final_rewards == [1.5, 1.5]
    records = batch.to_records()
    assert [r["error"] is not None for r in records] == [False, False, True, True]


def test_episodes_per_trial_free_shots_and_agent_state() -> None:
    env = countdown(TINY, episodes_per_trial=3, free_shots=2)
    seen: list[int] = []
    agent = CountingAgent()
    batch = env.run_trial([{"start": 1}], agent, on_episode=lambda e: seen.append(e.episode_index))
    assert seen == [0, 1, 2]
    trial = batch.groups[0].trials[0]
    assert [e.free_shot for e in trial] == [True, True, False]
    assert [e.final_reward for e in trial] == [0.0, 0.0, 1.5]
    assert all(r == 0.0 for e in trial[:2] for r in e.per_token_rewards)
    assert trial[0].metrics["raw_final_reward"] == 1.5
    # the scored row is the trial's final episode; the agent kept its state across episodes
    assert batch.episodes == [trial[2]]
    assert [e.agent_state for e in trial] == [1, 2, 3]
    assert len({e.session_id for e in trial}) == 1


def test_trials_run_concurrently_bounded_by_max_concurrency() -> None:
    env = countdown(None)
    agent = CountingAgent(delay=0.05)
    env.run_trial([{"start": 1}] * 8, agent, max_concurrency=4)
    assert agent.calls == 8
    assert 2 <= agent.peak <= 4
    serial = CountingAgent(delay=0.01)
    env.run_trial([{"start": 1}] * 4, serial, max_concurrency=1)
    assert serial.peak == 1


def test_bad_hook_returns_fail_the_episode_with_a_clear_error() -> None:
    class BadStep(CountdownEnv):
        @agentsgym.hookimpl
        def step_episode(self, state, action):
            return "not a tuple"

    env = BadStep(env_config={})
    episode = env.run_trial([{"start": 1}], CountingAgent()).failed[0]
    assert "expected (next_state, reward, done, info)" in episode.error


def test_agent_returning_garbage_fails_the_episode_with_a_clear_error() -> None:
    env = countdown(None)
    agent = agentsgym.FunctionAgent(lambda messages, state: 42)
    episode = env.run_trial([{"start": 1}], agent).failed[0]
    assert "must return (reply, agent_state)" in episode.error


def test_batch_to_dataset_round_trips_through_parquet(tmp_path) -> None:
    import datasets

    env = countdown(TINY)
    batch = env.run_trial([{"start": 2}], CountingAgent(), num_rollouts=2)
    path = tmp_path / "b.parquet"
    batch.to_dataset().to_parquet(str(path))
    loaded = datasets.Dataset.from_parquet(str(path))
    assert loaded.num_rows == 2
    assert loaded[0]["full_token_ids"] == batch.episodes[0].full_token_ids
    assert loaded[0]["messages"] == batch.episodes[0].messages
    assert loaded[0]["task_data"] == {"start": 2}


def test_failures_are_summarised_in_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    env = countdown(None)
    agent = agentsgym.FunctionAgent(lambda messages, state: ("boom", state))
    with caplog.at_level("WARNING", logger="agentsgym.engine.trials"):
        batch = env.run_trial([{"start": 1}] * 5, agent)
    assert len(batch.failed) == 5
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "5 of 5 episodes" in warnings[0].getMessage()
    assert "the env exploded" in warnings[0].getMessage()


def test_cancelling_a_run_stops_its_episodes_at_once() -> None:
    import asyncio

    class SlowAsync:
        def __init__(self) -> None:
            self.started = 0
            self.finished = 0

        async def get_action(self, messages, agent_state):
            self.started += 1
            await asyncio.sleep(30)
            self.finished += 1
            return "1", agent_state

    async def main(agent: SlowAsync) -> None:
        env = countdown(None)
        task = asyncio.ensure_future(env.arun_trial([{"start": 1}] * 6, agent, max_concurrency=3))
        while agent.started < 3:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    agent = SlowAsync()
    asyncio.run(main(agent))
    # three trials were in flight, none finished, and the queued three never started
    assert agent.started == 3 and agent.finished == 0
