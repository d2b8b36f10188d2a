"""agentsgym.randomness: per-episode generators and the global-random swap."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time

import pytest

from agentsgym.errors import DatasetRowError
from agentsgym.randomness import episode_numpy_rng, episode_random, global_random, task_seed


def test_an_integer_seed_is_the_seed() -> None:
    assert task_seed({"seed": 7, "solution": "x"}) == 7
    assert episode_random({"seed": 7}).random() == random.Random(7).random()


def test_tasks_without_an_integer_seed_get_a_stable_content_seed() -> None:
    a = task_seed({"solution": "apple", "level": 2})
    assert a == task_seed({"level": 2, "solution": "apple"})  # key order does not matter
    assert a != task_seed({"solution": "pear", "level": 2})
    assert task_seed({"seed": "abc"}) == task_seed({"seed": "abc", "other": 1})  # the seed decides
    assert task_seed({"seed": "abc"}) != task_seed({"seed": "abd"})
    assert task_seed({"seed": True}) != task_seed({"seed": 1})  # a bool is not a count
    assert task_seed({"seed": None, "x": 1}) == task_seed({"x": 1, "seed": None})
    assert 0 <= a < 2**64


def test_content_seeds_do_not_change_across_processes() -> None:
    """Python's hash() is salted per process; the derived seed must not be."""
    code = "from agentsgym.randomness import task_seed; print(task_seed({'solution': 'apple'}))"
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True,
            env={"PYTHONHASHSEED": salt},
        ).stdout.strip()
        for salt in ("1", "2")
    }
    assert outputs == {str(task_seed({"solution": "apple"}))}


@pytest.mark.parametrize("bad", [["seed", 1], "seed=1", None])
def test_task_data_that_is_not_a_dict_is_refused(bad: object) -> None:
    with pytest.raises(DatasetRowError, match="task_data must be a dict"):
        task_seed(bad)  # type: ignore[arg-type]


def test_task_data_that_is_not_json_is_refused_with_a_hint() -> None:
    with pytest.raises(DatasetRowError, match="JSON values only"):
        task_seed({"board": {1, 2}})


def test_numpy_generators_repeat_per_task_and_differ_across_tasks() -> None:
    first = episode_numpy_rng({"seed": 3}).integers(0, 10**9, size=4).tolist()
    assert first == episode_numpy_rng({"seed": 3}).integers(0, 10**9, size=4).tolist()
    assert first != episode_numpy_rng({"seed": 4}).integers(0, 10**9, size=4).tolist()
    negative = episode_numpy_rng({"seed": -3}).integers(0, 10**9, size=4).tolist()
    assert negative != first
    assert negative == episode_numpy_rng({"seed": -3}).integers(0, 10**9, size=4).tolist()


def test_global_random_swaps_in_the_episode_state_and_restores_the_global_one() -> None:
    random.seed(99)
    outside = random.getstate()
    rng = episode_random({"seed": 5})
    with global_random(rng) as same:
        assert same is rng
        first = [random.random() for _ in range(3)]
    assert random.getstate() == outside
    with global_random(rng):
        second = [random.random() for _ in range(3)]
    reference = random.Random(5)
    assert first + second == [reference.random() for _ in range(6)]  # progress was saved


def test_global_random_restores_after_an_exception_and_nests() -> None:
    outside = random.getstate()
    outer, inner = episode_random({"seed": 1}), episode_random({"seed": 2})
    with pytest.raises(ValueError), global_random(outer):
        a = random.random()
        with global_random(inner):
            b = random.random()
        c = random.random()
        raise ValueError("library failed")
    assert random.getstate() == outside
    ref_outer, ref_inner = random.Random(1), random.Random(2)
    assert (a, c) == (ref_outer.random(), ref_outer.random())
    assert b == ref_inner.random()


def test_global_random_refuses_what_is_not_a_generator() -> None:
    with pytest.raises(TypeError, match="episode_random"), global_random(42):  # type: ignore[arg-type]
        pass


def test_threads_drawing_through_global_random_each_get_their_own_sequence() -> None:
    results: dict[int, list[float]] = {}

    def play(seed: int) -> None:
        rng = episode_random({"seed": seed})
        draws = []
        for _ in range(20):
            with global_random(rng):
                draws.append(random.random())
                time.sleep(0)  # let other threads run inside their own blocks' turn
            time.sleep(0.0005)
        results[seed] = draws

    threads = [threading.Thread(target=play, args=(seed,)) for seed in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for seed in range(6):
        reference = random.Random(seed)
        assert results[seed] == [reference.random() for _ in range(20)]


def test_the_env_offers_the_helpers_as_methods() -> None:
    from envs_for_tests import countdown

    env = countdown(None)
    task = {"seed": 11}
    assert env.task_seed(task) == 11
    assert env.episode_random(task).random() == env.episode_random(task).random()
    assert env.episode_numpy_rng(task).integers(1000) == env.episode_numpy_rng(task).integers(1000)
    import random

    rng = env.episode_random(task)
    expected = env.episode_random(task)
    with env.global_random(rng):
        drawn = random.random()
    assert drawn == expected.random()
