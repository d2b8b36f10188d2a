"""``agentsgym train`` with an inference engine generating (--vllm-python, started; or
--vllm-server-base-url, attached), against vLLM stand-ins: the loopback model server's
emulation of vLLM's RL API, started as vLLM would be (fake_vllm_engine.py) or in this
process. The weights reach the engine after every update, every sampled token carries
the engine's version, and no token beyond the staleness bound is trained (audited from
the rows). The real vLLM runs in the vllm lane (test_vllm_lane.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("fastapi")

from agentsgym.testing import run_cli
from agentsgym_serve.model_server import OpenAICompatServer
from agentsgym_trl import ModelPolicy
from agentsgym_trl.vllm_server import LOG_FILE
from checkpointed_runs import CHECKPOINTED_RUN, GUESS, warm_tiny_model
from fake_vllm_engine import vllm_package

pytestmark = pytest.mark.usefixtures("torch_single_thread")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: Any) -> Path:
    return warm_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture
def fake_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """``--vllm-python`` that starts the stand-in (a fake ``vllm`` package on its path)."""
    package = vllm_package(tmp_path / "fake-vllm")
    monkeypatch.setenv("PYTHONPATH", str(package))
    return sys.executable


@pytest.fixture
def attached(model_dir: Path) -> Any:
    policy = ModelPolicy(str(model_dir), seed=0)
    with OpenAICompatServer(policy, models=["warm-tiny"]) as server:
        yield server
    policy.close()


def train(out: Path, model_dir: Path, *args: str) -> Any:
    return run_cli(
        "train", GUESS, "--output-dir", str(out), "--model", str(model_dir), *CHECKPOINTED_RUN,
        *args,
    )


def log(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]


def token_ages(out: Path) -> list[int]:
    """Rows only: for every agent token of every played row, how many versions older
    than the weights its step was trained at (step ``s`` trains at version ``s - 1``);
    unknown versions fail the audit."""
    ages = []
    for line in (out / "played.jsonl").read_text().splitlines():
        row = json.loads(line)
        for mask, version in zip(row["agent_token_mask"], row["per_token_policy_versions"]):
            if mask:
                assert version >= 0, "a sampled token without the engine's version"
                ages.append(row["step"] - 1 - version)
    return ages


def test_per_token_grpo_trains_with_a_started_engine_that_takes_every_update(
    model_dir: Path, tmp_path: Path, fake_vllm: str
) -> None:
    out = tmp_path / "run"
    result = train(
        out, model_dir, "--trainer", "per-token-grpo", "--max-steps", "2",
        "--vllm-python", fake_vllm,
    )
    assert result.code == 0, result.output
    steps = log(out)
    assert [s["step"] for s in steps] == [1, 2]
    assert all(s["weight_sync_seconds"] > 0 and s["stale_tokens_masked"] == 0 for s in steps)
    assert token_ages(out) and set(token_ages(out)) == {0}  # synchronous: all fresh
    server_log = (out / LOG_FILE).read_text()
    assert "fake vLLM: serving" in server_log
    assert "stopping the server" in server_log  # stopped with the run
    assert "reload_weights" not in result.output


def test_async_training_with_an_engine_trains_no_token_beyond_the_bound(
    model_dir: Path, tmp_path: Path, attached: Any
) -> None:
    out = tmp_path / "run"
    result = train(
        out, model_dir, "--trainer", "per-token-grpo", "--max-steps", "3",
        "--async", "--max-staleness", "1", "--vllm-server-base-url", attached.base_url,
    )
    assert result.code == 0, result.output
    ages = token_ages(out)
    assert ages and max(ages) <= 1 and min(ages) >= 0
    assert all(s["stale_tokens_masked"] == 0 for s in log(out))
    assert attached.engine.weight_version == "3"


def test_trl_grpo_trains_with_an_attached_engine(
    model_dir: Path, tmp_path: Path, attached: Any
) -> None:
    out = tmp_path / "run"
    result = train(
        out, model_dir, "--trainer", "trl-grpo", "--max-steps", "2",
        "--vllm-server-base-url", attached.base_url,
    )
    assert result.code == 0, result.output
    steps = log(out)
    assert [s["step"] for s in steps] == [1, 2]
    assert all(s["weight_sync_seconds"] > 0 for s in steps)
    assert set(token_ages(out)) == {0}
    assert attached.engine.weight_version == "2"


def test_an_engine_that_dies_mid_run_ends_it_with_the_training_saved_for_resume(
    model_dir: Path, tmp_path: Path, fake_vllm: str
) -> None:
    """It dies pushing step 2's weights (its third reload: the start's, step 1's, step
    2's): step 2 is trained, saved as checkpoint-2, and --resume goes on from there with
    a new server."""
    out = tmp_path / "run"
    args = ["--trainer", "per-token-grpo", "--vllm-python", fake_vllm]
    first = train(out, model_dir, *args, "--max-steps", "3", "--vllm-serve-arg=--die-on-reload=3")
    assert first.code != 0
    assert "checkpoint-2" in first.output and "--resume" in first.output, first.output
    assert (out / "checkpoint-2" / "trainer_state.pt").exists()
    resumed = train(out, model_dir, *args, "--max-steps", "3", "--resume")
    assert resumed.code == 0, resumed.output
    assert [s["step"] for s in log(out)] == [1, 2, 3]


def test_options_that_do_not_go_together_are_refused(model_dir: Path, tmp_path: Path) -> None:
    both = train(
        tmp_path / "a", model_dir, "--trainer", "per-token-grpo",
        "--vllm-python", sys.executable, "--vllm-server-base-url", "http://127.0.0.1:9",
    )
    assert both.code != 0 and "give one of them" in both.output
    sink = train(
        tmp_path / "b", model_dir, "--trainer", "dataset-sink",
        "--vllm-server-base-url", "http://127.0.0.1:9",
    )
    assert sink.code != 0 and "cannot train with vLLM generating" in sink.output


def test_an_attached_server_without_the_generate_api_fails_the_run_at_its_start(
    model_dir: Path, tmp_path: Path, attached: Any
) -> None:
    attached.engine.fail_route("/inference/v1/generate", 403)
    result = train(
        tmp_path / "run", model_dir, "--trainer", "per-token-grpo", "--max-steps", "1",
        "--vllm-server-base-url", attached.base_url,
    )
    assert result.code != 0 and "--enable-scale-out" in result.output, result.output
    assert not (tmp_path / "run" / "train_log.jsonl").exists()


def test_trl_grpo_refuses_two_weight_syncs(model_dir: Path, tmp_path: Path, attached: Any) -> None:
    result = train(
        tmp_path / "run", model_dir, "--trainer", "trl-grpo", "--max-steps", "1",
        "--trainer-option", "use_vllm=true", "--vllm-server-base-url", attached.base_url,
    )
    assert result.code != 0 and "choose one" in result.output, result.output
