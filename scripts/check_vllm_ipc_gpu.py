"""Check the trainer's side of the ``ipc`` weight sync on a CUDA GPU, without vLLM.

    python scripts/check_vllm_ipc_gpu.py          # needs torch with CUDA; about a minute

``agentsgym_trl/vllm_ipc.py`` packs a model's parameters as vLLM's CUDA IPC
weight-transfer engine reads them. This script packs a set of parameters (float32,
bfloat16, float16, a non-contiguous view, a scalar), carries the payload as the HTTP
route would (JSON, the handles pickled and base64-encoded), and has another process
read it with the steps of vLLM 0.32's receiver
(``vllm/distributed/weight_transfer/ipc_engine.py``: ``IPCWeightTransferUpdateInfo``
decodes and checks the payload, ``receive_weights`` looks up its GPU's UUID, puts its
device index at position 6 of the rebuild arguments and calls ``rebuild_cuda_tensor``),
then compares every tensor it rebuilt with the trainer's, bit for bit. What it cannot
check: vLLM's own ``load_weights`` of the tensors (that needs vLLM).

Standard library and torch only: ``vllm_ipc.py`` is loaded from its file, nothing of
agentsgym is imported. Prints one line per parameter and PASS or FAIL; exits 1 on a
failure. Run on an NVIDIA H200 (torch 2.11.0+cu130): PASS for all six, in 10 s.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import pickle
import sys
from pathlib import Path

import torch
import torch.multiprocessing as mp

IPC_MODULE = Path(__file__).parents[1] / "plugins/agentsgym_trl/src/agentsgym_trl/vllm_ipc.py"


def load_ipc_module() -> object:
    spec = importlib.util.spec_from_file_location("vllm_ipc", IPC_MODULE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parameters(device: str) -> list[tuple[str, torch.Tensor]]:
    """Parameters of the kinds a model has, on ``device``."""
    generator = torch.Generator(device="cpu").manual_seed(0)

    def random(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator)

    embedding = random(64, 32).to(device)
    return [
        ("model.embed_tokens.weight", embedding),
        ("model.layers.0.mlp.up_proj.weight", random(48, 32).to(device)),
        ("model.layers.0.input_layernorm.weight", random(32).to(device, torch.bfloat16)),
        ("model.layers.0.self_attn.q_proj.weight", random(32, 32).to(device, torch.float16)),
        ("lm_head.weight", embedding.t()),  # a non-contiguous view
        ("model.norm.scale", torch.tensor(1.5, device=device)),
    ]


def as_bytes(tensor: torch.Tensor) -> tuple[str, bytes]:
    """A tensor's dtype and raw bytes (a CPU tensor sent through a queue would be shared
    memory, which the receiver's exit takes away)."""
    flat = tensor.detach().contiguous().cpu().reshape(-1)
    return str(flat.dtype), flat.view(torch.uint8).numpy().tobytes()


def vllm_receiver(payload_json: str, results: "mp.Queue[object]") -> None:
    """vLLM 0.32's IPC receive path (unpacked), step by step, in another process."""
    from torch.multiprocessing.reductions import rebuild_cuda_tensor

    try:
        info = json.loads(payload_json)
        # IPCWeightTransferUpdateInfo.__post_init__
        handles = pickle.loads(base64.b64decode(info["ipc_handles_pickled"]))
        names, dtype_names, shapes = info["names"], info["dtype_names"], info["shapes"]
        assert len(dtype_names) == len(names) and len(shapes) == len(names)
        assert isinstance(handles, list) and len(handles) == len(names)
        # IPCWeightTransferEngine.receive_weights (packed=False)
        device_index = 0
        torch.cuda.set_device(device_index)
        received = {}
        for name, handle, dtype_name, shape in zip(names, handles, dtype_names, shapes):
            physical_gpu_id = str(torch.cuda.get_device_properties(device_index).uuid)
            if physical_gpu_id not in handle:
                raise ValueError(f"IPC handle not found for GPU UUID {physical_gpu_id}")
            args = list(handle[physical_gpu_id])
            args[6] = device_index
            weight = rebuild_cuda_tensor(*args)
            assert weight.dtype == getattr(torch, dtype_name), (name, weight.dtype, dtype_name)
            assert list(weight.shape) == shape, (name, list(weight.shape), shape)
            received[name] = as_bytes(weight)
        results.put(received)
    except Exception as exc:  # noqa: BLE001 - reported by the parent
        results.put(exc)


def main() -> int:
    if not torch.cuda.is_available():
        print("FAIL: no CUDA device")
        return 1
    ipc = load_ipc_module()
    sent = parameters("cuda:0")
    update, shared = ipc.ipc_update(sent)  # type: ignore[attr-defined]
    payload = json.dumps(ipc.json_safe_update(update))  # type: ignore[attr-defined]
    assert "ipc_handles" not in json.loads(payload)
    context = mp.get_context("spawn")
    results: mp.Queue[object] = context.Queue()
    reader = context.Process(target=vllm_receiver, args=(payload, results))
    reader.start()
    received = results.get(timeout=240)
    reader.join(timeout=60)
    del shared
    if isinstance(received, Exception):
        print(f"FAIL: the receiver raised {type(received).__name__}: {received}")
        return 1
    failures = 0
    for name, tensor in sent:
        same = received.get(name) == as_bytes(tensor)  # type: ignore[union-attr]
        failures += not same
        print(f"{'ok  ' if same else 'FAIL'} {name} {tuple(tensor.shape)} {tensor.dtype}")
    print("PASS" if not failures else f"FAIL: {failures} parameters differ")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
