"""Costs of the plugin author's kit.

    python bench/bench_kit.py

* randomness: creating an episode's generator, one ``global_random`` block alone,
  and blocks from 8 threads at once (they take turns under the process-wide lock).
* check_env: wall time on the built-in GuessTheNumber (with the bundled tokenizer)
  and the share of its concurrent determinism check.
* scaffold: ``agentsgym new-env`` plus ``pip install`` into a fresh venv, and the
  scaffolded package's ``check-env`` and own tests, as
  plugins/agentsgym_scaffold/tests/test_scaffold.py runs them (agentsgym-scaffold installed).

Figures go in bench/README.md; they are never asserted in tests.
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from agentsgym.randomness import episode_random, global_random  # noqa: E402


def best_of(runs: int, fn: Callable[[], float]) -> float:
    return min(fn() for _ in range(runs))


def bench_randomness() -> None:
    n = 20_000

    def create() -> float:
        start = time.perf_counter()
        for i in range(n):
            episode_random({"seed": i})
        return (time.perf_counter() - start) / n

    def create_hashed() -> float:
        start = time.perf_counter()
        for i in range(n):
            episode_random({"solution": f"word{i}", "level": 2})
        return (time.perf_counter() - start) / n

    def block() -> float:
        rng = episode_random({"seed": 1})
        start = time.perf_counter()
        for _ in range(n):
            with global_random(rng):
                random.random()
        return (time.perf_counter() - start) / n

    def threaded(threads: int = 8) -> float:
        per = n // threads

        def work(seed: int) -> None:
            rng = episode_random({"seed": seed})
            for _ in range(per):
                with global_random(rng):
                    random.random()

        pool = [threading.Thread(target=work, args=(s,)) for s in range(threads)]
        start = time.perf_counter()
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        return (time.perf_counter() - start) / (per * threads)

    print(f"episode_random, integer seed:  {best_of(3, create) * 1e6:.2f} us")
    print(f"episode_random, content seed:  {best_of(3, create_hashed) * 1e6:.2f} us")
    print(f"global_random block, 1 thread: {best_of(3, block) * 1e6:.2f} us")
    print(f"global_random block, 8 threads: {best_of(3, threaded) * 1e6:.2f} us per block")


def bench_check_env() -> None:
    from agentsgym.testing import check_env

    check_env("agentsgym/GuessTheNumber-v0")  # warm imports and the tokenizer

    def whole() -> float:
        start = time.perf_counter()
        check_env("agentsgym/GuessTheNumber-v0")
        return time.perf_counter() - start

    print(f"check_env GuessTheNumber: {best_of(3, whole):.2f} s")


def bench_scaffold() -> None:
    from venvs import ChildVenv

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        marks = [("start", time.perf_counter())]
        subprocess.run(
            [sys.executable, "-m", "agentsgym", "new-env", "acme/Maze", "--dir", str(root / "pkg")],
            check=True, capture_output=True,
        )
        marks.append(("new-env", time.perf_counter()))
        venv = ChildVenv(root / "venv")
        marks.append(("venv", time.perf_counter()))
        assert venv.pip_install(str(root / "pkg")).returncode == 0
        marks.append(("pip install", time.perf_counter()))
        assert venv.run("-m", "agentsgym", "check-env", "acme/Maze-v0").returncode == 0
        marks.append(("check-env", time.perf_counter()))
        assert venv.run("-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=root / "pkg").returncode == 0
        marks.append(("package tests", time.perf_counter()))
    for (_, before), (name, after) in zip(marks, marks[1:]):
        print(f"scaffold {name}: {after - before:.2f} s")


if __name__ == "__main__":
    bench_randomness()
    bench_check_env()
    bench_scaffold()
