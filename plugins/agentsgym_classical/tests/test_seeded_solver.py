"""A seeded ``classical/arithmetic-solver`` repeats exactly (issue 21.9).

Its slips used to come from one generator shared by every episode, drawn in the
order episodes happened to finish: two identical runs differed in 8 of 20 rows. Each
attempt's draw now comes from the agent's seed and the rollout's own seed, so a run
repeats whatever the concurrency, the order of the tasks or the executor.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentsgym
from agentsgym.types import EpisodeContext
from agentsgym_classical.agent import ArithmeticSolverAgent

ENV = "classical/Arithmetic-v0"
SOLVER = "classical/arithmetic-solver"
SLOPPY = ("--agent-option", "mistake_rate=0.5", "--agent-option", "seed=7")
# what a run records about the machine rather than the episode
TIMINGS = ("grading_seconds", "grading_attempts")


def rows_of(out: Path) -> list[dict[str, Any]]:
    """An output's rows in trial order, without session ids and grading timings."""
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    for row in rows:
        row.pop("session_id")
        for info in row["step_infos"]:
            for key in TIMINGS:
                info.pop(key, None)
    return sorted(rows, key=lambda r: (r["task_index"], r["rollout_index"]))


def rollout(out: Path, *extra: str) -> list[dict[str, Any]]:
    from agentsgym.testing import run_cli

    result = run_cli(
        "rollout",
        ENV,
        "--num-tasks",
        "10",
        "--num-rollouts",
        "2",
        "--tokenizer",
        "none",
        *SLOPPY,
        "--out",
        str(out),
        *extra,
    )
    assert result.code == 0, result.output
    return rows_of(out)


def replies(rows: list[dict[str, Any]]) -> list[list[str]]:
    return [[m["content"] for m in r["messages"] if m["role"] == "assistant"] for r in rows]


def test_two_concurrent_runs_write_the_same_rows(tmp_path: Path) -> None:
    first = rollout(tmp_path / "a.jsonl", "--max-concurrency", "16")
    second = rollout(tmp_path / "b.jsonl", "--max-concurrency", "3")
    assert first == second
    # and the seed is at work: some attempts slipped, and rollouts of a task differ
    assert any(r["num_turns"] > 1 for r in first)
    assert replies(first[0::2]) != replies(first[1::2])


def test_the_order_of_the_tasks_does_not_matter() -> None:
    # One episode at a time, in two orders: a generator shared across episodes would
    # hand out its draws differently, whatever the machine's timing.
    env = agentsgym.make(ENV, env_config={"num_tasks": 8})
    tasks = list(env.get_eval_dataset()["task_data"])
    agent = agentsgym.make_agent(SOLVER, mistake_rate=0.5, seed=7)

    def played(order: list[dict[str, Any]]) -> dict[tuple[str, int], list[Any]]:
        batch = env.run_trial(order, agent, num_rollouts=2, max_concurrency=1)
        return {
            (order[e.task_index]["id"], e.rollout_index): [s.info["answer"] for s in e.steps]
            for e in batch.episodes
        }

    assert played(tasks) == played(tasks[::-1])


def test_the_agent_seed_changes_the_slips() -> None:
    env = agentsgym.make(ENV, env_config={"num_tasks": 8})
    tasks = list(env.get_eval_dataset()["task_data"])

    def answers(seed: int) -> list[list[Any]]:
        agent = agentsgym.make_agent(SOLVER, mistake_rate=0.5, seed=seed)
        batch = env.run_trial(tasks, agent, num_rollouts=2)
        return [[s.info["answer"] for s in e.steps] for e in batch.episodes]

    assert answers(7) == answers(7) and answers(7) != answers(8)


def test_without_a_context_equal_conversations_get_equal_replies() -> None:
    env = agentsgym.make(ENV, env_config={"num_tasks": 40})
    prompts = [
        [{"role": "user", "content": f"{t['problem']}\n\nPut the answer in \\boxed{{}}."}]
        for t in env.get_eval_dataset()["task_data"]
    ]

    def reply_all(agent: ArithmeticSolverAgent) -> list[str]:
        return [agent.get_action(p, None)[0] for p in prompts]

    first = reply_all(ArithmeticSolverAgent(mistake_rate=0.5, seed=3))
    assert reply_all(ArithmeticSolverAgent(mistake_rate=0.5, seed=3)) == first
    assert first != reply_all(ArithmeticSolverAgent(mistake_rate=0.0))  # some slipped


def test_the_context_seed_decides_the_slip() -> None:
    problem = agentsgym.make(ENV).get_eval_dataset()[0]["task_data"]["problem"]
    prompt = [{"role": "user", "content": f"{problem}\n\nPut the answer in \\boxed{{}}."}]
    agent = ArithmeticSolverAgent(mistake_rate=0.5, seed=0)

    def reply(rollout_seed: int) -> str:
        context = EpisodeContext("s", ENV, 0, 0, 0, rollout_seed)
        return agent.get_action(prompt, None, context=context)[0]

    seen = {reply(seed) for seed in range(16)}
    assert seen == {reply(seed) for seed in range(16)} and len(seen) == 2  # slipped or not


def test_seed_must_be_an_integer() -> None:
    with pytest.raises(TypeError, match="seed must be an integer"):
        ArithmeticSolverAgent(seed="7")  # type: ignore[arg-type]


# ---------------------------------------------------------------------- on Ray
@pytest.fixture(scope="module")
def local_ray() -> Any:
    ray = pytest.importorskip("ray", reason="the ray executor needs ray (agentsgym-ray)")
    pytest.importorskip("agentsgym_ray", reason="the ray executor comes with agentsgym-ray")
    if ray.is_initialized():  # another test module's Ray: use it, leave it running
        yield ray
        return
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
        configure_logging=False,
    )
    yield ray
    ray.shutdown()


@pytest.mark.timeout(600)
def test_a_seeded_run_on_ray_writes_what_a_local_run_writes(local_ray: Any, tmp_path: Path) -> None:
    local = rollout(tmp_path / "local.jsonl", "--max-concurrency", "8")
    remote = rollout(tmp_path / "ray.jsonl", "--executor", "ray", "--num-workers", "2")
    assert remote == local
