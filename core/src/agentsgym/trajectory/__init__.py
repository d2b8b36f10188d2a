"""What the runner hands to trainers: episodes, padded groups and batches.

* :class:`TokenSegment` (:mod:`.segment`): one view of an episode's tokens as numpy
  arrays;
* :class:`StepRecord`, :class:`Episode` (:mod:`.episode`): one played episode,
  unpadded, with its invariant checks;
* :class:`TrajectoryGroup`, :class:`TrajectoryBatch` (:mod:`.batch`): the rollouts of
  each task padded per group, flat rows (see :mod:`.batch` for the layout);
* :func:`records_to_dataset` (:mod:`.records`): the rollout file schema.
"""

from agentsgym.trajectory.batch import TrajectoryBatch, TrajectoryGroup, zero_rewards
from agentsgym.trajectory.episode import Episode, StepRecord
from agentsgym.trajectory.records import records_to_dataset, rollout_features
from agentsgym.trajectory.segment import TokenSegment, rewards_array

__all__ = [
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
