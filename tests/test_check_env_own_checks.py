"""An env class's ``contract_checks``: its checks run in place of check_env's of the same
name (a skip is reported as skipped, with the reason) or after them; the context it gets
builds envs, picks tasks and hands played batches to check_env's checks of episodes."""

from __future__ import annotations

from typing import Any, ClassVar

from agentsgym import MultistepEnv, StepResult, hookimpl
from agentsgym.testing import CheckFailed, CheckSkipped, EnvCheckContext, check_env, register_env

FINISH = "finish_episode runs once per episode"
TRUNCATION = "episodes cut at max_steps_per_episode are truncated"
INFOS = "step infos are JSON-serialisable"


class Echo(MultistepEnv):
    """One step: the reply is the episode; a reward of 1."""

    seen: ClassVar[list[EnvCheckContext]] = []

    @hookimpl
    def initialize_episode(self, session_id: str, task_data: dict[str, Any]) -> int:
        return int(task_data["seed"])

    @hookimpl
    def format_prompt(self, state: int, step: int) -> str:
        return f"Say {state}."

    @hookimpl
    def step_episode(self, state: int, action: str) -> StepResult:
        return StepResult(state, 1.0, True, {"said": action})

    def get_train_dataset(self) -> Any:
        return self.make_dataset([{"seed": 1}, {"seed": 2}, {"seed": 3}])

    def get_eval_dataset(self) -> Any:
        return self.make_dataset([{"seed": 7}])

    @classmethod
    def contract_checks(cls, context: EnvCheckContext) -> dict[str, Any]:
        cls.seen.append(context)

        def no_finish() -> None:
            raise CheckSkipped("this env closes its own episodes")

        def truncation() -> None:
            raise CheckFailed("replaced, and failing on purpose")

        def plays() -> str:
            env = context.make(tokenizer=context.tokenizer)
            batch = env.run_trial(context.tasks(), context.agent, context.num_rollouts)
            context.record(batch)
            return f"{len(batch.all_episodes)} episodes"

        return {FINISH: no_finish, TRUNCATION: truncation, "the env's own play": plays}


def test_own_checks_replace_check_envs_in_place_skip_with_a_reason_and_add_after() -> None:
    Echo.seen.clear()
    with register_env("test/Echo-v0", Echo):
        report = check_env("test/Echo-v0", num_tasks=2, num_rollouts=3, raise_on_failure=False)
    by_name = {c.name: c for c in report.checks}
    names = [c.name for c in report.checks]
    assert names.count(FINISH) == 1 and names.count(TRUNCATION) == 1
    assert by_name[FINISH].status == "skipped"
    assert by_name[FINISH].detail == "this env closes its own episodes"
    assert by_name[TRUNCATION].status == "failed"
    assert by_name[TRUNCATION].detail == "replaced, and failing on purpose"
    assert names.index(FINISH) < names.index(TRUNCATION)  # in check_env's order
    assert names[-1] == "the env's own play"  # added after check_env's own
    assert by_name["the env's own play"].detail == "6 episodes"
    assert by_name["the env's own checks load (contract_checks)"].detail == "3 checks"
    assert [c.name for c in report.failures] == [TRUNCATION]
    (context,) = Echo.seen
    assert context.env_id == "test/Echo-v0"
    assert (context.num_tasks, context.num_rollouts) == (2, 3)
    assert context.tasks() == [{"seed": 1}, {"seed": 2}]


class Unplayed(Echo):
    """Skips both plays and hands back no batch."""

    @classmethod
    def contract_checks(cls, context: EnvCheckContext) -> dict[str, Any]:
        def skip() -> None:
            raise CheckSkipped("not played here")

        return {
            "episodes play without a tokenizer": skip,
            "token streams keep the fidelity invariants": skip,
        }


def test_the_checks_of_played_episodes_read_only_the_batches_handed_back() -> None:
    with register_env("test/Unplayed-v0", Unplayed):
        report = check_env("test/Unplayed-v0", raise_on_failure=False)
    infos = next(c for c in report.checks if c.name == INFOS)
    assert infos.status == "failed" and "no episode was played" in infos.detail
