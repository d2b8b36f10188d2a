"""Ray executor scaling: throughput with 1 and 2 workers, and Ray's per-trial overhead.

Usage: python bench/bench_ray.py [--tasks N] [--rollouts R] [--tokenizer PATH]

A CPU-bound workload (GuessTheNumber played by the instant bisect agent, tokenized
with a real tokenizer: the env and tokenizer work is all there is), timed locally
(one process) and on a local Ray with 1 and 2 workers, side by side. Goal (issue
12): 2 workers >= 0.8 x 2 x one worker. The per-trial overhead Ray adds is
(Ray with 1 worker - local) / trials.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import ray

import agentsgym

QWEN = Path(__file__).resolve().parents[2] / "shared" / "tokenizers" / "qwen2.5-1.5b-instruct"


def rows(n: int) -> list[dict]:
    return [
        {"env_class_path": "agentsgym/GuessTheNumber-v0", "env_config": {"high": 1000, "max_steps_per_episode": 12}, "task_data": {"seed": i}}
        for i in range(n)
    ]


def timed(fn) -> float:
    start = time.perf_counter()
    batch = fn()
    elapsed = time.perf_counter() - start
    assert not batch.failed
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=64)
    parser.add_argument("--rollouts", type=int, default=4)
    parser.add_argument("--tokenizer", default=str(QWEN) if QWEN.exists() else "agentsgym/tiny-chatml")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    data = rows(args.tasks)
    trials = args.tasks * args.rollouts
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)

    def local():
        return agentsgym.run_dataset(data, "agentsgym/bisect", args.rollouts, tokenizer=args.tokenizer)

    def on_ray(workers: int):
        return lambda: agentsgym.run_dataset(
            data, "agentsgym/bisect", args.rollouts, tokenizer=args.tokenizer,
            executor="ray", num_workers=workers,
        )

    on_ray(2)()  # warm: worker processes import agentsgym and load the tokenizer
    results = {
        "local (one process)": min(timed(local) for _ in range(args.repeats)),
        "ray, 1 worker": min(timed(on_ray(1)) for _ in range(args.repeats)),
        "ray, 2 workers": min(timed(on_ray(2)) for _ in range(args.repeats)),
    }
    ray.shutdown()
    print(f"{trials} trials of GuessTheNumber (bisect agent), tokenizer {Path(args.tokenizer).name}")
    print("| executor | wall time | trials/s |")
    print("| --- | --- | --- |")
    for name, seconds in results.items():
        print(f"| {name} | {seconds:.2f} s | {trials / seconds:.0f} |")
    one, two = results["ray, 1 worker"], results["ray, 2 workers"]
    print(f"\nspeed-up of 2 workers over 1: {one / two:.2f}x (goal >= 1.6x = 0.8 x 2)")
    overhead = (one - results["local (one process)"]) / trials
    print(f"per-trial overhead of Ray (1 worker vs local): {overhead * 1000:.2f} ms")


if __name__ == "__main__":
    main()
