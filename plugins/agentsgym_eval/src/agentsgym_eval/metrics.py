"""Evaluation metrics over k samples per task: accuracy, pass@k, cons@k, best@k.

Pure functions on plain values, so every figure can be checked by hand and reused
outside the CLI (a training loop's eval step, a notebook). Per-task functions take
the samples of one task; the ``mean_*`` helpers average them over a dataset.

Definitions (n samples per task, c of them correct):

* accuracy: the fraction of all samples that are correct (an estimate of pass@1).
* pass@k: the probability that at least one of k samples drawn without replacement
  from the n is correct, computed with the unbiased estimator of Chen et al. 2021
  ("Evaluating Large Language Models Trained on Code"): ``1 - C(n-c, k) / C(n, k)``.
  Sampling k of n and counting successes directly is biased for k < n; this is not.
* cons@k (majority vote, also "maj@k"): the task counts as solved when the most
  common answer among the first k samples is a correct one.
* best@k: the highest reward among the first k samples (an oracle picking the best
  of k), averaged over tasks.
* win, draw and loss rates (a role of a game): the fractions of outcomes above, at and
  below 0; a sample without an outcome (it failed) is a loss
  (:func:`agentsgym.runtime.win_draw_loss`, which the training step log uses too).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from fractions import Fraction
from math import comb


def accuracy(correct: Sequence[bool]) -> float:
    """The fraction of samples that are correct.

    :raises ValueError: on an empty sequence (an accuracy of nothing is undefined,
        and silently reporting 0.0 would hide a run where every episode failed).
    """
    if not correct:
        raise ValueError("accuracy of an empty sequence is undefined")
    return sum(1 for c in correct if c) / len(correct)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task: ``1 - C(n-c, k) / C(n, k)`` (Chen et al. 2021).

    Computed with exact integers (Python's ``math.comb``) and one final division,
    so small cases match hand computation exactly.

    :param n: samples drawn for the task.
    :param c: how many of them are correct.
    :param k: the budget; ``1 <= k <= n``.
    """
    if n < 1:
        raise ValueError(f"pass@k needs at least one sample, got n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"correct count c={c} must be between 0 and n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"k={k} must be between 1 and the number of samples n={n}")
    if n - c < k:  # every draw of k samples contains a correct one
        return 1.0
    return float(1 - Fraction(comb(n - c, k), comb(n, k)))


def mean_pass_at_k(counts: Sequence[tuple[int, int]], k: int) -> float:
    """pass@k averaged over tasks, from ``(n, c)`` pairs (samples, correct) per task."""
    if not counts:
        raise ValueError("mean pass@k over no tasks is undefined")
    return sum(pass_at_k(n, c, k) for n, c in counts) / len(counts)


def majority_vote(answers: Sequence[Hashable | None]) -> Hashable | None:
    """The most common answer, ignoring ``None`` (a sample that gave no answer).

    Ties go to the answer that appeared first, so the vote is deterministic and does
    not depend on hash order. ``None`` when no sample gave an answer.
    """
    counts = Counter(a for a in answers if a is not None)
    if not counts:
        return None
    best = max(counts.values())
    return next(a for a in answers if a is not None and counts[a] == best)


def cons_at_k(
    answers: Sequence[Hashable | None], correct: Sequence[bool], k: int | None = None
) -> bool:
    """Majority-vote correctness of one task over its first ``k`` samples.

    The winning answer (see :func:`majority_vote`) is judged by the first sample that
    gave it: answers are compared in a canonical form, so samples with equal answers
    were graded the same. A task where no sample answered counts as wrong.

    :param answers: the canonical answer of each sample (``None`` for no answer).
    :param correct: whether each sample was graded correct; same length.
    :param k: how many leading samples vote (default: all).
    """
    if len(answers) != len(correct):
        raise ValueError(f"{len(answers)} answers but {len(correct)} correctness flags")
    k = len(answers) if k is None else k
    if not 1 <= k <= len(answers):
        raise ValueError(f"k={k} must be between 1 and the number of samples {len(answers)}")
    winner = majority_vote(answers[:k])
    if winner is None:
        return False
    return bool(next(c for a, c in zip(answers[:k], correct[:k]) if a == winner))


def best_at_k(rewards: Sequence[float], k: int | None = None) -> float:
    """The highest reward among the first ``k`` samples of one task (default: all)."""
    k = len(rewards) if k is None else k
    if not 1 <= k <= len(rewards):
        raise ValueError(f"k={k} must be between 1 and the number of samples {len(rewards)}")
    return max(rewards[:k])
