"""Trainer adapters: the protocol of the consuming end of the pipeline.

* :class:`TrainerAdapter`, :class:`StepMetrics`, :class:`TrainResult`
  (:mod:`.protocol`): what an adapter implements and reports;
* :class:`RolloutSource` (:mod:`.source`): the tasks, and the runner that plays them.

The adapters themselves (``trl-grpo``, ``per-token-grpo``, ``dataset-sink``), the
``BatchTrainer`` base class and ``agentsgym train`` ship in agentsgym-trl and
register through the ``register_trainers`` hook like any third party's.
"""

from __future__ import annotations

from typing import Any

from agentsgym.satellites import moved_name
from agentsgym.trainers.protocol import StepCallback, StepMetrics, TrainerAdapter, TrainResult
from agentsgym.trainers.source import RolloutSource

__all__ = ["RolloutSource", "StepCallback", "StepMetrics", "TrainResult", "TrainerAdapter"]


def __getattr__(name: str) -> Any:
    return moved_name(__name__, name)
