"""A harness env runs through the core's trial runner, like every env: several episodes
per trial, free shots, the per-rollout seed (its agent's context and its program's) and
the trial callback; the agent answering through the gateway gets the episode's real
context with each call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

import agentsgym
from agentsgym import EpisodeContext
from agentsgym.errors import RunSettingsError
from agentsgym.runtime import arun_trial, rollout_seed, run_sync
from agentsgym_gateway.harness import HarnessEnv
from agentsgym_gateway.programs import ProgramOutcome, ProgramRun
from gateway_fixtures import TOKENIZER

TOOLS = [
    {
        "type": "function",
        "function": {"name": "look", "parameters": {"type": "object", "properties": {}}},
    }
]
TASKS = [{"q": 0}, {"q": 1}]


class RecordingAgent:
    """Answers every call with "42" and keeps the context each call came with."""

    def __init__(self) -> None:
        self.contexts: list[EpisodeContext] = []

    def get_action(self, messages: Any, state: Any, context: EpisodeContext) -> tuple[str, Any]:
        self.contexts.append(context)
        return "42", state


class TwoCalls(HarnessEnv):
    """A callable program that asks twice (with a tool offered), keeping its seed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.program_seeds: list[tuple[dict[str, Any], int]] = []

    def program(self, task_data: dict[str, Any]) -> Any:
        def run(run: ProgramRun) -> str:
            self.program_seeds.append((run.task_data, run.seed))
            client = openai.OpenAI(base_url=run.base_url, api_key=run.api_key)
            messages: list[Any] = [{"role": "user", "content": "what is it?"}]
            for _ in range(2):
                answer = client.chat.completions.create(
                    model=run.model, messages=messages, tools=TOOLS
                )
                messages += [
                    {"role": "assistant", "content": answer.choices[0].message.content},
                    {"role": "user", "content": "sure?"},
                ]
            return str(answer.choices[0].message.content)

        return run

    def verify(self, task_data: dict[str, Any], workdir: Path, outcome: ProgramOutcome) -> float:
        return 1.0 if outcome.result == "42" else 0.0


def _env(**config: Any) -> TwoCalls:
    return TwoCalls(agentsgym.load_tokenizer(TOKENIZER), config)


def test_episodes_per_trial_and_free_shots_hold_for_a_harness_env() -> None:
    env = _env(episodes_per_trial=3, free_shots=1)
    try:
        batch = env.run_trial(TASKS, RecordingAgent(), num_rollouts=2, seed=5)
    finally:
        env.close()
    for group in batch.groups:
        assert len(group.trials) == 2
        for trial in group.trials:
            assert [e.episode_index for e in trial] == [0, 1, 2]
            assert all(e.ok for e in trial), [e.error for e in trial]
            free, *scored = trial
            assert free.free_shot and free.final_reward == 0.0
            assert free.metrics["raw_final_reward"] == 1.0
            assert not any(e.free_shot for e in scored)
            assert [e.final_reward for e in scored] == [1.0, 1.0]
            assert {(e.task_index, e.rollout_index) for e in trial} == {
                (group.task_index, trial[0].rollout_index)
            }


def test_the_agent_and_the_program_get_the_rollouts_seed_and_the_real_context() -> None:
    agent = RecordingAgent()
    env = _env(episodes_per_trial=2)
    try:
        env.run_trial(TASKS, agent, num_rollouts=2, seed=5)
    finally:
        env.close()
    # 2 tasks x 2 rollouts x 2 episodes x 2 calls
    assert len(agent.contexts) == 16
    by_call = {(c.task_index, c.rollout_index, c.episode_index, c.step): c for c in agent.contexts}
    assert len(by_call) == 16  # each call has its own indices, steps 0 and 1
    for (task, rollout, _, step), context in by_call.items():
        assert step in (0, 1)
        assert context.seed == rollout_seed(5, env.env_id, TASKS[task], rollout)
        assert context.env_id == env.env_id and context.role is None
        assert context.tools == tuple(TOOLS)
    # one seed per rollout: the same for the episodes of a trial, different across rollouts
    seeds = {(c.task_index, c.rollout_index): c.seed for c in agent.contexts}
    assert len(set(seeds.values())) == 4
    program_seeds = {(task["q"], seed) for task, seed in env.program_seeds}
    assert program_seeds == {(task, seed) for (task, _), seed in seeds.items()}


def test_the_trial_callback_gets_each_harness_trial_once() -> None:
    env = _env(episodes_per_trial=2)
    seen: list[tuple[tuple[int, int], int]] = []
    try:
        batch = run_sync(
            arun_trial(
                env,
                TASKS,
                RecordingAgent(),
                num_rollouts=2,
                on_trial=lambda job, episodes: seen.append((job.key, len(episodes))),
            )
        )
    finally:
        env.close()
    assert sorted(seen) == [((t, r), 2) for t in range(2) for r in range(2)]
    assert len(batch.all_episodes) == 8


def test_a_harness_env_without_an_agent_or_a_backend_url_says_what_to_give() -> None:
    env = _env()
    try:
        with pytest.raises(RunSettingsError, match="backend_url"):
            env.run_trial(TASKS)
    finally:
        env.close()
