"""The rollout stream on the Ray executor: trials play in Ray workers, with the
``openai`` agent against a versioned loopback model server, and every turn records
the server's version; the bound holds (issue 30)."""

from __future__ import annotations

from typing import Any

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("torch")

import agentsgym
from agentsgym.trainers import RolloutSource
from agentsgym_serve.model_server import OpenAICompatServer, ScriptedPolicy
from agentsgym_trl.rollout_stream import RolloutStream

TINY = "agentsgym/tiny-chatml"
GUESS = "agentsgym/GuessTheNumber-v0"

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def local_ray() -> Any:
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
        configure_logging=False,
    )
    yield ray
    from agentsgym_ray.executor import shutdown_workers

    shutdown_workers()
    ray.shutdown()


def versions(batch: Any) -> set[int | None]:
    return {v for e in batch.episodes for v in e.policy_versions}


def test_the_stream_plays_on_ray_and_each_turn_keeps_the_servers_version(local_ray: Any) -> None:
    rows = [
        {"env_class_path": GUESS, "env_config": {"high": 3}, "task_data": {"seed": s}}
        for s in range(4)
    ]
    with OpenAICompatServer(ScriptedPolicy(["[1]", "[2]", "[3]"], TINY), models=["m"]) as server:
        recipe = agentsgym.runtime.AgentSpec(
            "openai", {"base_url": server.base_url, "model": "m", "max_retries": 0}
        )
        source = RolloutSource(
            rows,
            tokenizer=TINY,
            num_rollouts=2,
            tasks_per_step=1,
            executor="ray",
            executor_options={"num_workers": 1},
        )
        with RolloutStream(source, recipe, max_staleness=1, last_step=3) as stream:
            first = stream.take(1)
            server.update_weights(version=1)  # the trainer's update 1 reaches the server
            stream.advance(1)
            second = stream.take(2)
            third = stream.take(3)  # dispatched after update 1: played by version 1
    assert versions(first.batch) == {0} and versions(second.batch) <= {0, 1}
    assert versions(third.batch) == {1}
    assert all(s.metrics["staleness_max"] <= 1 for s in (first, second, third))
    assert all(len(s.batch.groups) == 1 and not s.batch.failed for s in (first, second, third))
