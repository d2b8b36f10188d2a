"""Ray executor scaling: throughput with 1 and 2 workers, and Ray's per-trial overhead.

Usage: python bench/bench_ray.py [--tasks N] [--rollouts R] [--rounds K] [--tokenizer PATH]

Two workloads, each timed locally (one process) and on a local Ray (``num_cpus=2``)
with 1 and 2 workers. The three are interleaved round by round (so a busy spell of a
shared machine hits all of them) and the best round of each is kept.

* **scaling**: GuessTheNumber on [1, 1000] played by the instant bisect agent and
  tokenized with a real tokenizer (Qwen2.5's when ``../shared/tokenizers`` is there):
  the env and tokenizer work is all there is. Goal (issue 12): 2 workers >= 0.8 x 2 x
  one worker.
* **overhead**: one-turn episodes without a tokenizer (the trial itself is almost
  free), so (Ray with 1 worker - local) / trials is what Ray adds per trial: shipping
  the row, the worker's scheduling, pickling the episodes back, the driver's receipt.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray

import agentsgym

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from tokenizer_packs import pack_path

QWEN = pack_path("qwen2.5-1.5b-instruct")
GUESS = "agentsgym/GuessTheNumber-v0"


def rows(n: int, **config: Any) -> list[dict[str, Any]]:
    return [{"env_class_path": GUESS, "env_config": config, "task_data": {"seed": i}} for i in range(n)]


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    batch = fn()
    elapsed = time.perf_counter() - start
    assert not batch.failed, batch.failed[0].error
    return elapsed


def measure(
    data: list[dict[str, Any]], rollouts: int, tokenizer: str | None, rounds: int
) -> dict[str, float]:
    # As a training loop does (and as each Ray worker does), the driver keeps its envs
    # across calls; Ray workers load the tokenizer from its name once.
    envs: dict[Any, Any] = {}

    def play(executor: str, workers: int = 1) -> Callable[[], Any]:
        return lambda: agentsgym.runtime.run_dataset(
            data, "agentsgym/bisect", rollouts, tokenizer=tokenizer, envs=envs,
            executor=executor, num_workers=workers,
        )

    runs = {"local (one process)": play("local"), "ray, 1 worker": play("ray", 1),
            "ray, 2 workers": play("ray", 2)}
    play("ray", 2)()  # warm: the worker processes import agentsgym and load the tokenizer
    play("local")()
    best = {name: float("inf") for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            best[name] = min(best[name], timed(run))
    return best


def table(title: str, trials: int, results: dict[str, float]) -> None:
    print(f"\n{title}: {trials} trials")
    print("| executor | wall time | trials/s |")
    print("| --- | --- | --- |")
    for name, seconds in results.items():
        print(f"| {name} | {seconds:.2f} s | {trials / seconds:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=128)
    parser.add_argument("--rollouts", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--tokenizer", default=str(QWEN) if QWEN.exists() else "agentsgym/tiny-chatml"
    )
    args = parser.parse_args()
    # as the executor does when it starts a local Ray: workers at the driver's niceness
    os.environ.setdefault("RAY_worker_niceness", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)

    trials = args.tasks * args.rollouts
    scaling = measure(
        rows(args.tasks, high=1000, max_steps_per_episode=12), args.rollouts, args.tokenizer,
        args.rounds,
    )
    table(f"scaling, GuessTheNumber (bisect, tokenizer {Path(args.tokenizer).name})", trials,
          scaling)
    one, two = scaling["ray, 1 worker"], scaling["ray, 2 workers"]
    print(f"\nspeed-up of 2 workers over 1: {one / two:.2f}x (goal >= 1.6x = 0.8 x 2)")
    print(f"2 workers over one local process: {scaling['local (one process)'] / two:.2f}x")

    few = args.tasks * 4
    overhead = measure(rows(few, high=1), 1, None, args.rounds)
    table("overhead, one-turn episodes without a tokenizer", few, overhead)
    per_trial = (overhead["ray, 1 worker"] - overhead["local (one process)"]) / few
    print(f"\nper-trial overhead of Ray (1 worker vs local): {per_trial * 1000:.2f} ms")
    ray.shutdown()


if __name__ == "__main__":
    main()
