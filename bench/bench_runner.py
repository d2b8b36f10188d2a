"""Runner throughput: episodes and tokens per second, and the cost of long episodes.

Usage: python bench/bench_runner.py [--tokenizer PATH] [--repeats N]

The agent is scripted (instant), so the figures are the framework's own overhead:
hook calls, tokenization of each turn, reward assignment and padding. An env turn
renders only its own new messages, so the long-episode rows (cost per turn at 10, 50
and 200 turns) should stay flat; bench_tokenization.py measures that in detail.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import agentsgym  # noqa: E402
from envs_for_tests import CountdownEnv, CountingAgent  # noqa: E402


def bench_batch(tokenizer, tasks: int, rollouts: int, repeats: int, concurrency: int) -> dict:
    env = agentsgym.make("agentsgym/GuessTheNumber-v0", tokenizer=tokenizer)
    agent = agentsgym.make_agent("agentsgym/bisect")
    task_list = [{"seed": i} for i in range(tasks)]
    times, tokens = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        batch = env.run_trial(task_list, agent, rollouts, max_concurrency=concurrency)
        times.append(time.perf_counter() - start)
        tokens = sum(e.num_tokens for e in batch.episodes)
    best = min(times)
    return {"episodes/s": len(batch) / best, "tokens/s": tokens / best, "seconds": best}


class SlowBisect:
    """The bisect agent behind a fixed per-call latency, like a model server."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.inner = agentsgym.make_agent("agentsgym/bisect")

    def get_action(self, messages, agent_state):
        time.sleep(self.latency)
        return self.inner.get_action(messages, agent_state)


def bench_slow_agent(tokenizer, latency: float, concurrency: int) -> float:
    env = agentsgym.make("agentsgym/GuessTheNumber-v0", tokenizer=tokenizer)
    start = time.perf_counter()
    env.run_trial([{"seed": i} for i in range(16)], SlowBisect(latency), 2, max_concurrency=concurrency)
    return time.perf_counter() - start


def bench_long(tokenizer, turns: int, repeats: int) -> float:
    env = CountdownEnv(tokenizer=tokenizer, env_config={"max_steps_per_episode": turns})
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        env.run_trial([{"start": turns}], CountingAgent(), max_concurrency=1)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000 / turns


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", default="agentsgym/tiny-chatml")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    tokenizer = agentsgym.load_tokenizer(args.tokenizer)
    print(f"tokenizer: {args.tokenizer}")
    for concurrency in (1, 8):
        r = bench_batch(tokenizer, tasks=32, rollouts=4, repeats=args.repeats, concurrency=concurrency)
        print(f"GuessTheNumber 32 tasks x 4 rollouts, concurrency {concurrency}: "
              f"{r['episodes/s']:.0f} episodes/s, {r['tokens/s']:.0f} tokens/s ({r['seconds']:.2f} s)")
    for concurrency in (1, 8, 32):
        seconds = bench_slow_agent(tokenizer, 0.02, concurrency)
        print(f"GuessTheNumber 16 tasks x 2 rollouts, agent latency 20 ms, concurrency {concurrency}: {seconds:.2f} s")
    for turns in (10, 50, 200):
        print(f"Countdown {turns} turns: {bench_long(tokenizer, turns, args.repeats):.2f} ms per turn")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
