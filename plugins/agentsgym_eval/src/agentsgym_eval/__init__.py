"""agentsgym-eval: scoring an agent on an env's tasks, and ``agentsgym eval``.

* :mod:`.samples`: what a sample is (one rollout of one task: correct, its answer,
  graded), read from the step infos an env reports (``correct``, ``answer``,
  ``graded``), and :func:`summarize` into an :class:`EvalReport`;
* :mod:`.metrics`: accuracy, pass@k (unbiased), cons@k and best@k;
* ``agentsgym eval ENV_ID`` (:mod:`.commands`): k rollouts per task, the per-sample
  results streamed to ``--out`` (resumable like any run), the summary beside them.
"""

from agentsgym_eval.samples import (
    EvalReport,
    RoleReport,
    Sample,
    Scores,
    evaluate,
    role_reports,
    sample_from_episode,
    samples_from_rows,
    summarize,
    trial_sample,
)

__all__ = [
    "EvalReport",
    "RoleReport",
    "Sample",
    "Scores",
    "evaluate",
    "role_reports",
    "sample_from_episode",
    "samples_from_rows",
    "summarize",
    "trial_sample",
]
