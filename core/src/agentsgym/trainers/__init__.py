"""Trainer adapters: the consuming end of the pipeline.

``TrainerAdapter`` (the interface), ``RolloutSource`` (tasks + runner) and
``BatchTrainer`` (base class of adapters that consume one batch per step) live in
:mod:`agentsgym.trainers.base`. The adapters that ship with the core, registered
through the ``register_trainers`` hook:

* ``trl-grpo``: :class:`~agentsgym.trainers.trl_grpo.TRLGRPOAdapter`
* ``per-token-grpo``: :class:`~agentsgym.trainers.per_token.PerTokenGRPOTrainer`
* ``dataset-sink``: :class:`~agentsgym.trainers.dataset_sink.DatasetSink`

The adapters import torch/TRL lazily, on attribute access.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from agentsgym.trainers.base import (
    BatchTrainer,
    RolloutSource,
    StepMetrics,
    TrainerAdapter,
    TrainResult,
)

__all__ = [
    "BatchTrainer",
    "DatasetSink",
    "PerTokenGRPOTrainer",
    "RolloutSource",
    "StepMetrics",
    "TRLGRPOAdapter",
    "TrainResult",
    "TrainerAdapter",
]

_LAZY = {
    "DatasetSink": "agentsgym.trainers.dataset_sink",
    "PerTokenGRPOTrainer": "agentsgym.trainers.per_token",
    "TRLGRPOAdapter": "agentsgym.trainers.trl_grpo",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentsgym.trainers' has no attribute {name!r}")
    return getattr(import_module(module), name)


if TYPE_CHECKING:
    from agentsgym.trainers.dataset_sink import DatasetSink
    from agentsgym.trainers.per_token import PerTokenGRPOTrainer
    from agentsgym.trainers.trl_grpo import TRLGRPOAdapter
