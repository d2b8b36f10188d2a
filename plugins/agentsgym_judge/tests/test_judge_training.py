"""Judge failures and the trainers: an episode whose judge failed gives no gradient and
stays out of its group's baseline in both trainers (as every failed episode does), and
``agentsgym train`` counts it. And the project's tiny random model as a judge: what it
answers is either read as a score or fails as such, never scored by default.

Skipped without agentsgym-trl and torch.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from judge_fixtures import JUDGE_MODEL, judge_settings, serve

pytest.importorskip("torch")
pytest.importorskip("agentsgym_trl")

import agentsgym
from agentsgym.errors import is_reward_unavailable
from agentsgym.output import failure_report
from agentsgym.runtime import StepMetrics
from agentsgym.testing import run_cli
from agentsgym_judge import Judge, yes_no
from agentsgym_trl import ModelPolicy
from agentsgym_trl.per_token_batch import batch_arrays
from agentsgym_trl.screening import RolloutScreen
from agentsgym_trl.trl_rollouts import pad_token_id, rollouts_to_trl

ENV = "judge/OpenAnswer-v0"
TINY = "agentsgym/tiny-chatml"


def judged_env(server: Any, num_tasks: int = 6, **judge: Any) -> Any:
    config = {"judge": judge_settings(server, **judge), "num_tasks": num_tasks}
    return agentsgym.make(ENV, tokenizer=TINY, env_config=config)


def unscored_ids(env: Any, tasks: list[dict[str, Any]]) -> set[str]:
    """The tasks whose judge fails (``player_and_judge`` cannot read its own products)."""
    ids = {t["id"] for t in tasks if " × " in t["question"]}
    assert ids and len(ids) < len(tasks), "the seed should draw products and other questions"
    return ids


def test_per_token_grpo_trains_on_scored_episodes_only(answering_server: Any) -> None:
    env = judged_env(answering_server)
    tasks = env.questions("eval")
    batch = env.run_trial(tasks, agentsgym.ScriptedAgent("12"), num_rollouts=2)
    failed = unscored_ids(env, tasks)
    assert {e.task_data["id"] for e in batch.failed} == failed
    assert all(is_reward_unavailable(e.error) for e in batch.failed)

    tensors, counts = batch_arrays(
        batch,
        RolloutScreen(on_retokenized="allow", trainer="per-token-grpo"),
        multi_turn=None,
        credit="episode",
        gamma=1.0,
        normalization="mean",
    )
    rows = tensors["input_ids"].shape[0]
    assert rows == len(batch.episodes) == 2 * (len(tasks) - len(failed))
    assert counts == {"dropped_rollouts": 0.0, "masked_rollouts": 0.0}
    # A failed judgement is in no row, so in no baseline: a group's advantages are its
    # scored rollouts' rewards minus their own mean (here all equal: advantage 0).
    assert float(abs(tensors["advantages"]).max()) == 0.0
    metrics = StepMetrics.of_batch(batch, step=1)
    assert metrics.num_failed == metrics.num_reward_unavailable == 2 * len(failed)


def test_trl_grpo_gives_a_judge_failure_no_reward(answering_server: Any) -> None:
    """TRL plays each prompt entry as a trial of its own: a failed one gets reward None,
    which TRL (>= 1.13) leaves out of the group's baseline, with advantage 0."""
    env = judged_env(answering_server)
    tasks = env.questions("eval")
    batch = env.run_trial(tasks, agentsgym.ScriptedAgent("12"), num_rollouts=1)
    output, extra = rollouts_to_trl(
        batch,
        pad_token_id(env.tokenizer),
        screen=RolloutScreen(on_retokenized="allow", trainer="trl-grpo"),
    )
    failed = unscored_ids(env, tasks)
    rewards = output["agentsgym_final_reward"]
    for task, reward, mask in zip(tasks, rewards, output["env_mask"]):
        if task["id"] in failed:
            assert reward is None and mask == [0]  # no reward, no token in the loss
        else:
            assert reward in (0.0, 1.0) and any(mask)
    assert extra == []


def test_train_counts_the_episodes_without_a_reward(answering_server: Any, tmp_path: Path) -> None:
    env = judged_env(answering_server, num_tasks=4)
    unscored = len(unscored_ids(env, env.questions("train")))
    out = tmp_path / "run"
    result = run_cli(
        "train",
        ENV,
        "--trainer",
        "per-token-grpo",
        "--model",
        "tiny",
        "--max-steps",
        "1",
        "--num-tasks",
        "4",
        "--tasks-per-step",
        "4",
        "--num-rollouts",
        "2",
        "--max-new-tokens",
        "4",
        "--env-config",
        f"judge={json.dumps(judge_settings(answering_server))}",
        "--env-config",
        "num_tasks=4",
        "--output-dir",
        str(out),
    )
    assert result.code == 0, result.output
    (log,) = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert log["num_failed"] == log["num_reward_unavailable"] == 2 * unscored
    assert log["num_rollouts"] == 2 * (4 - unscored)
    assert re.search(
        rf"of them without a reward \(a judge failed\)\s*│\s*{2 * unscored}\b", result.output
    )
    assert f"{2 * unscored} of them had no reward (RewardUnavailableError" in result.output


def reply_length(reply: str) -> float:
    """A parser that reads any reply: its length, up to 8 characters, as a score."""
    return min(len(reply), 8) / 8


def test_the_tiny_model_as_judge_scores_or_fails_never_silently() -> None:
    """The tiny random model answers noise. Read by yes/no, a judgement is a score when
    the reply says yes or no and a judge failure otherwise (counted as one); read by a
    parser that takes any reply, every judgement is scored, with the model's reply kept."""
    policy = ModelPolicy("tiny", TINY, seed=0)
    try:
        with serve(policy) as server:
            env = judged_env(server, num_tasks=4, max_tokens=8)
            tasks = env.questions("eval")
            by_yes_no = env.run_trial(tasks, agentsgym.ScriptedAgent("12"), 2)
            env.judge = Judge(env.config.judge, parser=reply_length)
            by_length = env.run_trial(tasks, agentsgym.ScriptedAgent("12"), 2)
            requests = list(server.requests)
    finally:
        policy.close()
    assert len(by_yes_no.episodes) + len(by_yes_no.failed) == 8
    for episode in by_yes_no.episodes:
        judgement = episode.steps[0].info["judge"]
        assert episode.final_reward == judgement["score"] == yes_no(judgement["reply"])
    for episode in by_yes_no.failed:
        assert is_reward_unavailable(episode.error), episode.error
        assert "holds no score for yes_no" in episode.error
    report = failure_report(e.error for e in [*by_yes_no.episodes, *by_yes_no.failed])
    assert report.reward_unavailable == report.failed == len(by_yes_no.failed)

    assert not by_length.failed and len(by_length.episodes) == 8
    for episode in by_length.episodes:
        judgement = episode.steps[0].info["judge"]
        assert judgement["model"] == JUDGE_MODEL and isinstance(judgement["reply"], str)
        assert episode.final_reward == judgement["score"] == reply_length(judgement["reply"])
    assert all(r["max_tokens"] == 8 and r["temperature"] == 0.0 for r in requests)
