"""Per-episode randomness that stays deterministic when episodes run concurrently.

Episodes of one env run at once, so a draw from shared random state depends on how they
interleaved: an episode is deterministic only with its own generator, seeded from its
task and kept in its state (:func:`episode_random`, :func:`episode_numpy_rng`), or with
:func:`global_random` around libraries that use the ``random`` module (TextArena).
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

__all__ = ["SEED_KEY", "episode_numpy_rng", "episode_random", "global_random", "task_seed"]

SEED_KEY = "seed"
"""The ``task_data`` key that seeds an episode."""

# One for the process, as the global `random` state is; re-entrant so that blocks may nest.
_GLOBAL_RANDOM_LOCK = threading.RLock()


def task_seed(task_data: Mapping[str, Any]) -> int:
    """The seed of an episode of ``task_data``, stable across processes.

    ``task_data["seed"]`` when it is an integer; otherwise a SHA-256 hash (``hash()``
    changes with every process) of the seed, or of the whole task when it has none.

    :raises DatasetRowError: ``task_data`` is not a dict of JSON values.
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
    return int.from_bytes(digest[:8], "big")  # a 64-bit seed


def episode_random(task_data: Mapping[str, Any]) -> random.Random:
    """The episode's own :class:`random.Random` (make it in ``initialize_episode``, keep
    it in the state, draw from it instead of the ``random`` module's functions)."""
    return random.Random(task_seed(task_data))


def episode_numpy_rng(task_data: Mapping[str, Any]) -> np.random.Generator:
    """The episode's own :class:`numpy.random.Generator`, instead of ``numpy.random.*``."""
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

    It holds a process-wide lock: keep it to the library call and never ``await`` in it.
    On exit the episode's progress is saved into ``rng`` and the global state restored.
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
