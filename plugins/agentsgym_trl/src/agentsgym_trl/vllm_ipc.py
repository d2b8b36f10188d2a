"""The trainer's side of vLLM's CUDA IPC weight transfer, without vLLM installed.

vLLM's IPC engine (``vllm/distributed/weight_transfer/ipc_engine.py``, backend
``"ipc"``) loads weights that a process on the same GPU shares with it: the update
payload names each parameter, its dtype and shape, and gives a CUDA IPC handle per
parameter, keyed by the physical GPU's UUID (``torch.multiprocessing.reductions.
reduce_tensor``'s rebuild arguments). The worker looks up its own GPU's UUID, puts
its device index at position 6 of the arguments and calls ``rebuild_cuda_tensor``.
Over HTTP the handles travel pickled and base64-encoded (``ipc_handles_pickled``),
which the worker accepts only with ``VLLM_ALLOW_INSECURE_SERIALIZATION=1``.

This module builds that payload (unpacked: one handle per parameter) from a torch
model with torch alone, so the trainer needs no vLLM. It imports only the standard
library at import time (``scripts/check_vllm_ipc_gpu.py`` loads it by path on a GPU
machine that has torch and nothing of agentsgym).
"""

from __future__ import annotations

import base64
import pickle
from typing import Any


def ipc_update(named_tensors: Any) -> tuple[dict[str, Any], list[Any]]:
    """vLLM's IPC update info for ``(name, CUDA tensor)`` pairs (a model's
    ``named_parameters()``), and the contiguous copies it shares: they must stay alive
    until the server has loaded them (past ``/finish_weight_update``)."""
    import torch
    from torch.multiprocessing.reductions import reduce_tensor

    names: list[str] = []
    dtype_names: list[str] = []
    shapes: list[list[int]] = []
    handles: list[dict[str, tuple[Any, ...]]] = []
    shared: list[Any] = []
    for name, tensor in named_tensors:
        if not tensor.is_cuda:
            raise ValueError(
                f"{name} is on {tensor.device}: CUDA IPC shares GPU memory only (use the "
                "reload weight sync for a model on the CPU)"
            )
        weight = tensor.detach().contiguous()
        uuid = str(torch.cuda.get_device_properties(weight.device.index).uuid)
        _, rebuild_args = reduce_tensor(weight)
        names.append(name)
        dtype_names.append(str(weight.dtype).split(".")[-1])
        shapes.append(list(weight.shape))
        handles.append({uuid: rebuild_args})
        shared.append(weight)
    update = {
        "names": names,
        "dtype_names": dtype_names,
        "shapes": shapes,
        "ipc_handles": handles,
    }
    return update, shared


def json_safe_update(
    update_info: dict[str, Any] | list[dict[str, Any]],
) -> dict[str, Any] | list[dict[str, Any]]:
    """An update payload as JSON carries it: ``ipc_handles`` (tuples of non-JSON objects)
    pickled and base64-encoded into ``ipc_handles_pickled``, as vLLM's own HTTP client
    (``HTTPVLLMWeightSyncClient``) sends them. Payloads without handles (NCCL's) pass
    as they are."""
    if isinstance(update_info, list):
        return [json_safe_update(info) for info in update_info]  # type: ignore[misc]
    handles = update_info.get("ipc_handles")
    if handles is None:
        return update_info
    safe = {k: v for k, v in update_info.items() if k != "ipc_handles"}
    safe["ipc_handles_pickled"] = base64.b64encode(pickle.dumps(handles)).decode("ascii")
    return safe
