"""What the runner hands to trainers: episodes (:mod:`.episode`) of token segments
(:mod:`.segment`), padded groups and batches (:mod:`.batch`), the rollout file schema
(:mod:`.records`)."""

from agentsgym.trajectory.batch import TrajectoryBatch, TrajectoryGroup, zero_rewards
from agentsgym.trajectory.episode import UNKNOWN_VERSION, Episode, StepRecord
from agentsgym.trajectory.records import records_to_dataset, rollout_features
from agentsgym.trajectory.segment import TokenSegment, rewards_array

__all__ = [
    "UNKNOWN_VERSION",
    "Episode",
    "StepRecord",
    "TokenSegment",
    "TrajectoryBatch",
    "TrajectoryGroup",
    "records_to_dataset",
    "rewards_array",
    "rollout_features",
    "zero_rewards",
]
