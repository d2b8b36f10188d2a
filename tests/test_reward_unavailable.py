"""RewardUnavailableError: a reward that could not be computed (a judge failed) fails its
episode as a kind of its own, whichever hook raised it; trainers leave it out as any
failed episode, and the run's figures count it apart. Also the contract a judge's record
relies on: what reward_shaping adds to ``step_result.info`` is kept in the step's info."""

from __future__ import annotations

from typing import Any

import pytest

from agentsgym import RewardTerm, ScriptedAgent, hookimpl
from agentsgym.errors import EpisodeError, RewardUnavailableError, is_reward_unavailable
from agentsgym.output import failure_report
from agentsgym.runtime import StepMetrics
from envs_for_tests import CountdownEnv, CountingAgent


class JudgeFailsIn:
    """A plugin whose judge fails in hook ``where`` for the task starting at ``start``."""

    def __init__(self, where: str, start: int) -> None:
        self.where = where
        self.start = start

    def _judge(self, hook: str, state: Any) -> None:
        if hook == self.where and state is not None and state.get("from") == self.start:
            raise RewardUnavailableError(f"the judge timed out in {hook}")

    @hookimpl(wrapper=True)
    def step_episode(self, state: dict[str, Any]) -> Any:
        result = yield
        self._judge("step_episode", state)
        return result

    @hookimpl
    def reward_shaping(self, state: dict[str, Any]) -> RewardTerm:
        self._judge("reward_shaping", state)
        return RewardTerm("judged", 0.0)

    @hookimpl
    def finish_episode(self, state: dict[str, Any] | None) -> None:
        self._judge("finish_episode", state)


class RemembersStart:
    """Keeps the task's start in the state, so the judge knows which task it judges."""

    @hookimpl(wrapper=True)
    def initialize_episode(self, task_data: dict[str, Any]) -> Any:
        state = yield
        return {**state, "from": int(task_data["start"])}

    @hookimpl(wrapper=True)
    def step_episode(self, state: dict[str, Any]) -> Any:
        result = yield
        return (
            {**result.state, "from": state["from"]},
            result.reward,
            result.done,
            result.info,
        )


@pytest.mark.parametrize("where", ["step_episode", "reward_shaping", "finish_episode"])
def test_an_unavailable_reward_fails_the_episode_as_its_own_kind(where: str) -> None:
    env = CountdownEnv(env_config={}, plugins=[RemembersStart(), JudgeFailsIn(where, start=2)])
    batch = env.run_trial([{"start": 1}, {"start": 2}], CountingAgent(), num_rollouts=1)
    (failed,) = batch.failed
    assert failed.task_data == {"start": 2}
    assert is_reward_unavailable(failed.error), failed.error
    at = "finish_episode: " if where == "finish_episode" else ""
    assert failed.error == f"RewardUnavailableError: {at}the judge timed out in {where}"
    assert [e.task_data for e in batch.episodes] == [{"start": 1}]  # the other is scored
    assert batch.final_rewards == [1.5]

    metrics = StepMetrics.of_batch(batch, step=1)
    assert (metrics.num_failed, metrics.num_reward_unavailable) == (1, 1)


def test_other_failures_are_not_of_that_kind() -> None:
    env = CountdownEnv(env_config={})
    batch = env.run_trial([{"start": 1}], ScriptedAgent("boom"), num_rollouts=1)
    (failed,) = batch.failed
    assert failed.error == "RuntimeError: the env exploded"
    assert not is_reward_unavailable(failed.error)
    assert StepMetrics.of_batch(batch, step=1).num_reward_unavailable == 0
    assert not is_reward_unavailable(None)
    assert not is_reward_unavailable("EpisodeError: RewardUnavailableError: quoted, not raised")


def test_a_reward_unavailable_error_is_an_episode_error() -> None:
    assert issubclass(RewardUnavailableError, EpisodeError)


def test_the_failure_report_counts_unavailable_rewards_apart() -> None:
    report = failure_report(
        [
            None,
            "RewardUnavailableError: the judge at http://j/v1 failed: HTTP 500",
            "RewardUnavailableError: finish_episode: the judge timed out",
            "RuntimeError: the env exploded",
        ]
    )
    assert (report.total, report.failed, report.reward_unavailable) == (4, 3, 2)


def test_what_reward_shaping_adds_to_the_step_info_is_kept() -> None:
    """A judge called from reward_shaping records its judgement on the step this way."""

    class RecordsJudgement:
        @hookimpl
        def reward_shaping(self, action: str, step_result: Any) -> RewardTerm:
            step_result.info["judge"] = {"reply": "yes", "score": 1.0, "prompt": action}
            return RewardTerm("judge", 1.0)

    env = CountdownEnv(env_config={}, plugins=[RecordsJudgement()])
    batch = env.run_trial([{"start": 1}], CountingAgent(), num_rollouts=1)
    (step,) = batch.episodes[0].steps
    assert step.info == {"right": True, "judge": {"reply": "yes", "score": 1.0, "prompt": "1"}}
    assert step.reward_terms == {"judge": 1.0}
