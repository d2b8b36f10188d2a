"""The Ray executor on a local Ray (2 CPUs): same trajectories as a local run, results
streamed to the driver, dead workers retried or recorded, clear errors."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest

ray = pytest.importorskip("ray")

import agentsgym
from agentsgym.errors import AgentError

TINY = "agentsgym/tiny-chatml"
GUESS = "agentsgym/GuessTheNumber-v0"

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def local_ray() -> Any:
    import sys

    # Classes defined here (test agents) travel to the workers by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
        configure_logging=False,
    )
    yield ray
    ray.shutdown()


class _GoneWorker:
    """An actor handle of a Ray cluster that was shut down: calling it raises."""

    class close:  # noqa: N801 - the shape of an actor method
        @staticmethod
        def remote() -> Any:
            raise RuntimeError("Can't find actor: it might be dead or from a different cluster")


def test_workers_of_a_cluster_that_was_shut_down_are_forgotten_without_a_new_cluster() -> None:
    """Another script (or test) ran on Ray and shut it down: the next run must not call
    the stale workers, which would raise or start a cluster of their own."""
    from agentsgym_ray import executor as ray_executor

    assert not ray.is_initialized()
    ray_executor._actor_pools[("stale", 1)] = [_GoneWorker()]
    ray_executor.shutdown_workers()
    assert ray_executor._actor_pools == {}
    assert not ray.is_initialized()


def rows(n: int, **config: Any) -> list[dict[str, Any]]:
    return [
        {"env_class_path": GUESS, "env_config": dict(config), "task_data": {"seed": i}}
        for i in range(n)
    ]


def fields(batch: Any) -> Any:
    return (
        batch.padded_full_token_ids,
        batch.padded_agent_token_mask,
        batch.padded_per_token_rewards,
        batch.final_rewards,
        batch.group_indices,
        [e.messages for e in batch.episodes],
        [[s.info for s in e.steps] for e in batch.episodes],
    )


def test_a_seeded_scripted_run_gives_identical_trajectories_locally_and_on_ray(
    local_ray: Any,
) -> None:
    data = rows(5, high=30)
    local = agentsgym.runtime.run_dataset(data, "agentsgym/bisect", 3, tokenizer=TINY, seed=4)
    seen: list[tuple[int, int]] = []
    remote = agentsgym.runtime.run_dataset(
        data,
        "agentsgym/bisect",
        3,
        tokenizer=TINY,
        seed=4,
        executor="ray",
        num_workers=2,
        on_trial=lambda job, episodes: seen.append(job.key),
    )
    assert not remote.failed and len(remote) == 15
    assert fields(remote) == fields(local)
    assert sorted(seen) == [(t, r) for t in range(5) for r in range(3)]  # streamed to the driver


def test_agents_are_built_in_each_worker_from_a_recipe(local_ray: Any) -> None:
    recipe = agentsgym.runtime.AgentSpec("scripted", {"replies": ["[1]", "[2]", "[3]"]})
    batch = agentsgym.runtime.run_dataset(
        rows(2, high=3), recipe, 2, tokenizer=TINY, executor="ray", num_workers=2
    )
    assert not batch.failed
    assert all(e.steps[0].action == "[1]" for e in batch.episodes)
    with pytest.raises(AgentError, match="needs a recipe, not the agent object"):
        agentsgym.runtime.run_dataset(
            rows(1), agentsgym.ScriptedAgent(["[1]"]), 1, executor="ray", num_workers=1
        )


class _PidAgent:
    """Plays slowly and tells the driver its worker's pid (a file), so a test can kill it."""

    def __init__(self, path: str) -> None:
        self.path = path

    async def get_action(self, messages: Any, agent_state: Any) -> Any:
        with open(self.path, "a") as handle:
            handle.write(f"{os.getpid()}\n")
        await asyncio.sleep(0.2)
        return "[50]", agent_state


def kill_first_worker_when_it_plays(pids: Any) -> tuple[Any, list[int]]:
    """A thread that SIGKILLs the first worker process that records its pid."""
    import signal
    import threading

    killed: list[int] = []

    def kill() -> None:
        while not pids.exists() or not pids.read_text().strip():
            threading.Event().wait(0.05)
        pid = int(pids.read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    killer = threading.Thread(target=kill, daemon=True)
    killer.start()
    return killer, killed


def test_the_tasks_of_a_killed_worker_are_retried_elsewhere(local_ray: Any, tmp_path: Any) -> None:
    pids = tmp_path / "pids"
    spec = agentsgym.runtime.AgentSpec(_PidAgent, {"path": str(pids)})
    killer, killed = kill_first_worker_when_it_plays(pids)
    batch = agentsgym.runtime.run_dataset(
        rows(4, max_steps_per_episode=3, high=3), spec, 2, executor="ray", num_workers=2
    )
    killer.join(60)
    assert killed, "the test never killed a worker"
    # every trial is accounted for: played again on a fresh worker (retries), none lost
    played = {(e.task_index, e.rollout_index) for e in batch.all_episodes}
    assert played == {(t, r) for t in range(4) for r in range(2)}
    assert not batch.failed
    assert all(e.num_turns == 3 for e in batch.episodes)


def test_without_retries_a_dead_workers_trials_are_recorded_failed(
    local_ray: Any, tmp_path: Any
) -> None:
    from agentsgym.executors import ExecutionRequest, build_envs
    from agentsgym.rows import parse_rows
    from agentsgym_ray import RayExecutor

    pids = tmp_path / "pids"
    parsed = parse_rows(rows(2, max_steps_per_episode=3, high=3))
    keys = [(t, r) for t in range(2) for r in range(2)]
    request = ExecutionRequest(
        rows=parsed,
        keys=keys,
        envs=build_envs(parsed),
        agent=agentsgym.runtime.AgentSpec(_PidAgent, {"path": str(pids)}),
        num_rollouts=2,
        max_concurrency=8,
    )
    killer, killed = kill_first_worker_when_it_plays(pids)
    results = asyncio.run(RayExecutor(1, max_task_retries=0, tasks_in_flight=2).arun(request))
    killer.join(60)
    assert killed and sorted(results) == keys
    failed = [e for episodes in results.values() for e in episodes if not e.ok]
    assert failed, "a trial of the killed worker should be recorded as failed"
    assert all(e.error.startswith("WorkerDiedError") for e in failed)


def test_without_ray_the_error_names_the_package(monkeypatch: Any) -> None:
    import builtins

    real_import = builtins.__import__

    def no_ray(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "ray":
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    from agentsgym_ray.executor import RayUnavailableError

    with pytest.raises(RayUnavailableError, match=r"pip install ray"):
        agentsgym.runtime.run_dataset(rows(1), "agentsgym/bisect", 1, executor="ray")


def test_the_plugin_registers_the_ray_executor() -> None:
    from agentsgym.registry import get_registry

    spec = get_registry().executor("ray")
    assert spec.distribution == "agentsgym-ray" and spec.load().remote


def test_workers_are_kept_for_the_next_call_with_the_same_settings(local_ray: Any) -> None:
    from agentsgym_ray import executor as ray_executor

    def play() -> Any:
        return agentsgym.runtime.run_dataset(
            rows(2, high=5), "agentsgym/bisect", 2, tokenizer=TINY, executor="ray", num_workers=2
        )

    play()
    [(key, first)] = list(ray_executor._actor_pools.items())
    pids = sorted(ray.get([w.ping.remote() for w in first]))
    play()
    assert list(ray_executor._actor_pools) == [key]
    assert sorted(ray.get([w.ping.remote() for w in ray_executor._actor_pools[key]])) == pids
    # other settings replace the pool (its actors hold CPUs the new ones need)
    agentsgym.runtime.run_dataset(rows(1), "agentsgym/bisect", 1, executor="ray", num_workers=1)
    assert key not in ray_executor._actor_pools


# ---------------------------------------------------------------------- the command line
def cli_rows(out: Any) -> list[dict[str, Any]]:
    """An output's rows without their random session ids, in trial order."""
    import json

    rows = [json.loads(line) for line in out.read_text().splitlines()]
    for row in rows:
        row.pop("session_id")
    return sorted(rows, key=lambda r: (r["task_index"], r["rollout_index"]))


def test_the_cli_plays_on_ray_and_writes_what_a_local_run_writes(
    local_ray: Any, tmp_path: Any
) -> None:
    from agentsgym.testing import run_cli

    common = ("rollout", GUESS, "--num-tasks", "3", "--num-rollouts", "2", "--tokenizer", TINY)
    local = run_cli(*common, "--out", str(tmp_path / "local.jsonl"))
    assert local.code == 0, local.output
    remote = run_cli(
        *common, "--out", str(tmp_path / "ray.jsonl"), "--executor", "ray", "--num-workers", "2"
    )
    assert remote.code == 0, remote.output
    assert cli_rows(tmp_path / "ray.jsonl") == cli_rows(tmp_path / "local.jsonl")
    record = json.loads((tmp_path / "ray.jsonl.run.json").read_text())
    assert record["settings"]["executor"] == "ray" and record["settings"]["num_workers"] == 2
    assert record["status"] == "complete"


def test_ray_resumes_a_killed_run_exactly_once(local_ray: Any, tmp_path: Any) -> None:
    """A run killed after 3 of 8 trials (a torn write after them) finishes on Ray with
    every trial once, equal to one uninterrupted run."""
    from agentsgym.output import OutputPaths, scan_journal
    from agentsgym.testing import run_cli

    common = ("rollout", GUESS, "--num-tasks", "4", "--num-rollouts", "2", "--tokenizer", TINY)
    reference = tmp_path / "reference.jsonl"
    assert run_cli(*common, "--out", str(reference)).code == 0
    # what a run killed after 3 trials leaves: their rows, half of the next, a running record
    out = tmp_path / "run.jsonl"
    trials = list(scan_journal(reference).trials.values())
    kept = "".join(json.dumps(row) + "\n" for rows in trials[:3] for row in rows)
    out.write_text(kept + json.dumps(trials[3][0])[:40])
    record = json.loads(OutputPaths(reference).manifest.read_text())
    OutputPaths(out).manifest.write_text(json.dumps({**record, "status": "running"}))
    resumed = run_cli(*common, "--out", str(out), "--resume", "--executor", "ray")
    assert resumed.code == 0, resumed.output
    assert "3 of 8 trials already written, 5 to play" in resumed.stdout

    def in_order(path: Any) -> list[dict[str, Any]]:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        return sorted(rows, key=lambda r: (r["task_index"], r["rollout_index"]))

    rows = in_order(out)
    assert [(r["task_index"], r["rollout_index"]) for r in rows] == [
        (t, r) for t in range(4) for r in range(2)
    ]
    strip = ("session_id",)  # a fresh id per played trial; the rest must be equal
    assert [{k: v for k, v in r.items() if k not in strip} for r in rows] == [
        {k: v for k, v in r.items() if k not in strip} for r in in_order(reference)
    ]


def test_cli_without_ray_is_one_line_naming_the_package(tmp_path: Any, monkeypatch: Any) -> None:
    import builtins

    from agentsgym.testing import run_cli

    out = str(tmp_path / "x.jsonl")
    real_import = builtins.__import__

    def no_ray(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "ray":
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    missing = run_cli("rollout", GUESS, "--executor", "ray", "--out", out)
    said = " ".join(missing.stderr.split())
    assert missing.code == 2 and "pip install -e ./plugins/agentsgym_ray" in said
    assert "Traceback" not in missing.output and not (tmp_path / "x.jsonl").exists()


def test_a_worker_closes_the_envs_it_built() -> None:
    """The body of an actor, in process: stopping the workers closes their envs."""
    from agentsgym.runtime import AgentSpec
    from agentsgym_ray.executor import RolloutWorker, WorkerSettings

    settings = WorkerSettings(
        tokenizer=None,
        allow_class_paths=None,
        agent=AgentSpec("agentsgym/bisect"),
        agents={},
        max_concurrency=4,
        seed=0,
    )
    worker = RolloutWorker(settings)
    played = asyncio.run(worker.play([(rows(1)[0], 0, [0, 1])]))
    assert [key for key, _ in played] == [(0, 0), (0, 1)]
    (env,) = worker.envs.values()
    closed: list[str] = []
    env.close = lambda: closed.append(env.env_id)  # type: ignore[method-assign]
    worker.close()
    assert closed == [GUESS] and worker.envs == {}


def test_an_env_with_roles_plays_on_ray_with_an_agent_per_role(
    local_ray: Any, tmp_path: Any
) -> None:
    from agentsgym.testing import run_cli

    common = ("rollout", "classical/TicTacToe-v0", "--num-tasks", "3", "--num-rollouts", "2")
    x, o = "x=classical/tictactoe-random", "o=classical/tictactoe-heuristic"
    roles = ("--agent", x, "--agent", o)
    local = run_cli(*common, *roles, "--out", str(tmp_path / "local.jsonl"))
    assert local.code == 0, local.output
    on_ray = ("--executor", "ray", "--num-workers", "2")
    remote = run_cli(*common, *roles, "--out", str(tmp_path / "ray.jsonl"), *on_ray)
    assert remote.code == 0, remote.output
    rows = cli_rows(tmp_path / "ray.jsonl")
    assert rows == cli_rows(tmp_path / "local.jsonl")
    assert [row["role"] for row in rows[:2]] == ["x", "o"]


def test_a_worker_that_cannot_be_called_does_not_stop_the_others_closing(local_ray: Any) -> None:
    from agentsgym_ray import executor as ray_executor

    agentsgym.runtime.run_dataset(rows(1), "agentsgym/bisect", 1, executor="ray", num_workers=1)
    [pool] = ray_executor._actor_pools.values()
    pool.append(_GoneWorker())
    ray_executor.shutdown_workers()
    assert ray_executor._actor_pools == {}
