"""``agentsgym train --executor ray``: the episodes play in Ray workers, the trainer's
own model answers them from this process (served on loopback, token-in), and every
turn keeps the sampled ids and the version of the weights that generated them, with
``--async`` and without (issue 30)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray", reason="--executor ray needs agentsgym-ray's ray")
pytest.importorskip("agentsgym_ray", reason="--executor ray comes with agentsgym-ray")
pytest.importorskip(
    "agentsgym_serve", reason="the model is served to the workers by agentsgym-serve"
)
pytest.importorskip("torch")
pytest.importorskip("trl")

from agentsgym.testing import run_cli
from checkpointed_runs import GUESS

RUN = [
    "train",
    GUESS,
    "--trainer",
    "per-token-grpo",
    "--model",
    "tiny",
    "--env-config",
    "high=3",
    "--env-config",
    "max_steps_per_episode=2",
    "--num-tasks",
    "2",
    "--num-rollouts",
    "2",
    "--tasks-per-step",
    "1",
    "--max-new-tokens",
    "4",
    "--executor",
    "ray",
    "--num-workers",
    "1",
]

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("torch_single_thread")]


@pytest.fixture(scope="module")
def local_ray() -> Any:
    """One small local Ray for the module (the executor joins it)."""
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


def played(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "played.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(("mode", "steps"), [(["--async", "--max-staleness", "1"], 2), ([], 1)])
def test_train_plays_on_ray_workers_with_the_trainers_own_model(
    mode: list[str], steps: int, local_ray: Any, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    result = run_cli(*RUN, *mode, "--max-steps", str(steps), "--output-dir", str(out))
    assert result.code == 0, result.output
    logged = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [s["step"] for s in logged] == list(range(1, steps + 1))
    assert all(s["num_rollouts"] == 2 and s["num_failed"] == 0 for s in logged)
    rows = played(out)
    assert sorted({r["step"] for r in rows}) == list(range(1, steps + 1)) and len(rows) == 2 * steps
    # the workers' ids are the model's samples, verbatim, each turn with its version
    assert all(set(r["step_token_sources"]) == {"sampled"} for r in rows)
    assert all(r["min_policy_version"] is not None for r in rows)
    assert all(s.get("unversioned_episodes", 0.0) == 0.0 for s in logged)


def test_a_trainer_that_plays_inside_its_own_loop_is_refused_on_ray(tmp_path: Path) -> None:
    """trl-grpo's TRL loop generates with its model itself: no worker can reach it."""
    trl = [*RUN[:3], "trl-grpo", *RUN[4:]]
    result = run_cli(*trl, "--max-steps", "1", "--output-dir", str(tmp_path / "run"))
    assert result.code != 0 and "plays its model inside its own loop" in result.output


def test_a_chat_template_choice_is_refused_on_ray(tmp_path: Path) -> None:
    """Workers load the tokenizer by name: they could not render another template."""
    result = run_cli(*RUN, "--chat-template", "training", "--output-dir", str(tmp_path / "run"))
    assert result.code != 0 and "loads the tokenizer by name in each worker" in result.output
