"""Per-episode randomness that stays deterministic when episodes run concurrently.

The runner plays many episodes of one env instance at once (threads for plain hooks,
an event loop for ``async def`` hooks), so anything an episode draws from a shared
random state depends on how the episodes happened to interleave. An episode is
deterministic only if it draws from a generator of its own, seeded from its task:

* :func:`episode_random` gives a :class:`random.Random` and
  :func:`episode_numpy_rng` a :class:`numpy.random.Generator`, both seeded by
  :func:`task_seed` (``task_data["seed"]``, or a stable seed derived from the task's
  content when it has none). Keep them in the episode state.
* :func:`global_random` is for libraries that draw from the *global* ``random``
  module themselves (TextArena does): inside the ``with`` block the global state is
  the episode's own, under a process-wide lock; on exit the episode's progress is
  saved back into its generator and the global state is restored. Wrap every call
  into such a library with it, in every hook that makes one.

``agentsgym.testing.check_env`` plays episodes concurrently with a slow agent and
fails an env whose episodes leak random state into each other.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from agentsgym.errors import DatasetRowError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "SEED_KEY",
    "episode_numpy_rng",
    "episode_random",
    "global_random",
    "task_seed",
]

SEED_KEY = "seed"
"""The ``task_data`` key that seeds an episode."""

_SEED_BITS = 64
# One lock for the whole process: the global `random` state is one object, whichever
# env or thread swaps it. Re-entrant so that a block may nest inside another.
_GLOBAL_RANDOM_LOCK = threading.RLock()


def task_seed(task_data: Mapping[str, Any]) -> int:
    """The seed of an episode of ``task_data``: an integer, stable across processes.

    ``task_data["seed"]`` when it is an integer (so ``random.Random(seed)`` in older
    code and :func:`episode_random` agree); a seed of another JSON type (a string, a
    list) is hashed. A task without a ``seed`` gets a hash of its whole content, so
    two different tasks get different episodes and the same task the same one. The
    hash is SHA-256, not Python's ``hash()``, which changes with every process.

    :raises DatasetRowError: ``task_data`` is not a dict, or holds values that are
        not JSON (a task must survive a dataset file).
    """
    if not isinstance(task_data, Mapping):
        raise DatasetRowError(
            f"task_data must be a dict (one task: solution, seed, ...), got "
            f"{type(task_data).__name__}: {task_data!r:.80}"
        )
    seed = task_data.get(SEED_KEY)
    if isinstance(seed, int) and not isinstance(seed, bool):
        return seed
    content = dict(task_data) if seed is None else {SEED_KEY: seed}
    try:
        text = json.dumps(content, sort_keys=True, ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise DatasetRowError(
            f"cannot derive a seed from task_data {task_data!r:.120}: {exc}. task_data must "
            "hold JSON values only (str, int, float, bool, None, lists and dicts of them); "
            "or give it an integer 'seed'"
        ) from None
    digest = hashlib.sha256(text.encode("ascii")).digest()
    return int.from_bytes(digest[: _SEED_BITS // 8], "big")


def episode_random(task_data: Mapping[str, Any]) -> random.Random:
    """A :class:`random.Random` of the episode's own, seeded by :func:`task_seed`.

    Create it in ``initialize_episode`` and keep it in the state; draw from it in the
    other hooks instead of the ``random`` module's functions.
    """
    return random.Random(task_seed(task_data))


def episode_numpy_rng(task_data: Mapping[str, Any]) -> np.random.Generator:
    """A :class:`numpy.random.Generator` of the episode's own, seeded by :func:`task_seed`.

    Use it instead of ``numpy.random.*`` functions, which share one global state.
    """
    import numpy as np

    seed = task_seed(task_data)
    # SeedSequence takes non-negative integers; a negative seed maps to a distinct one.
    return np.random.default_rng(seed if seed >= 0 else [1, -seed])


@contextmanager
def global_random(rng: random.Random) -> Iterator[random.Random]:
    """Make the global ``random`` state the episode's own for the ``with`` block.

    For libraries that call ``random.random()``, ``random.choice()``, ... themselves::

        state["rng"] = episode_random(task_data)          # in initialize_episode
        with global_random(state["rng"]):                 # in every hook
            game.reset(num_players=1)                     # draws from `random`

    The block holds a process-wide lock: concurrent episodes take turns in it, so
    keep it to the library call. It restores the global state afterwards and saves
    the episode's progress into ``rng``, so the next block continues the episode's
    own sequence. Do not ``await`` inside the block: an ``async def`` hook that did
    would hold the lock while other episodes wait for it on the same event loop.

    :param rng: the episode's generator (:func:`episode_random`).
    :return: ``rng``, for convenience.
    """
    if not isinstance(rng, random.Random):
        raise TypeError(
            f"global_random takes the episode's random.Random (episode_random(task_data)), "
            f"got {type(rng).__name__}"
        )
    with _GLOBAL_RANDOM_LOCK:
        saved = random.getstate()
        random.setstate(rng.getstate())
        try:
            yield rng
        finally:
            rng.setstate(random.getstate())
            random.setstate(saved)
