"""The engine against a slow agent: does it keep a model server busy?

Usage: python bench/bench_engine.py [--repeats N] [--only sync|async|openai]

Every scenario plays episodes of exactly 10 turns (CountdownEnv from 10 to 1, the
agent always right) against an agent that takes 50 ms per reply, so the ideal wall
time is 10 x 50 ms = 0.5 s however many episodes run, as long as they all run at
once. Efficiency = ideal / measured (1.0 is perfect). Scenarios:

* sync:   a plain agent (time.sleep), 64 episodes, default settings (max_concurrency
          64), without a tokenizer and with the bundled one;
* async:  an async agent (asyncio.sleep), 256 episodes, max_concurrency=256;
* openai: the OpenAI-compatible agent against the project's loopback server running
          in its own process (replies held 50 ms), 64 concurrent episodes.

Targets (issue 8): sync >= 0.8, async >= 0.8, openai >= 0.7.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import agentsgym  # noqa: E402
from envs_for_tests import CountdownEnv  # noqa: E402

LATENCY = 0.05
TURNS = 10
IDEAL = TURNS * LATENCY


def countdown_reply(messages: list[dict[str, str]]) -> str:
    return "".join(ch for ch in messages[-1]["content"] if ch.isdigit())


class SleepyAgent:
    def get_action(self, messages: Any, agent_state: Any) -> tuple[str, Any]:
        time.sleep(LATENCY)
        return countdown_reply(messages), agent_state


class AsyncSleepyAgent:
    async def get_action(self, messages: Any, agent_state: Any) -> tuple[str, Any]:
        await asyncio.sleep(LATENCY)
        return countdown_reply(messages), agent_state


def env(tokenizer: Any = None) -> CountdownEnv:
    return CountdownEnv(
        tokenizer=agentsgym.load_tokenizer(tokenizer),
        env_config={"max_steps_per_episode": TURNS, "start": TURNS},
    )


def timed(play: Any, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        batch = play()
        best = min(best, time.perf_counter() - start)
        assert not batch.failed and all(e.num_turns == TURNS for e in batch.episodes)
    return best


def bench_sync(repeats: int) -> list[tuple[str, float]]:
    rows = []
    for label, tokenizer in (("no tokenizer", None), ("tiny-chatml", "agentsgym/tiny-chatml")):
        e = env(tokenizer)
        seconds = timed(lambda e=e: e.run_trial([{}] * 64, SleepyAgent()), repeats)
        rows.append((f"sync agent, 64 episodes, defaults, {label}", seconds))
    return rows


def bench_async(repeats: int) -> list[tuple[str, float]]:
    e = env(None)
    seconds = timed(lambda: e.run_trial([{}] * 256, AsyncSleepyAgent(), max_concurrency=256), repeats)
    e2 = env("agentsgym/tiny-chatml")
    seconds_tok = timed(
        lambda: e2.run_trial([{}] * 256, AsyncSleepyAgent(), max_concurrency=256), repeats
    )
    return [
        ("async agent, 256 episodes, max_concurrency=256, no tokenizer", seconds),
        ("async agent, 256 episodes, max_concurrency=256, tiny-chatml", seconds_tok),
    ]


SERVER = """
import sys, time
from agentsgym.testing_server import OpenAICompatServer, ScriptedPolicy
def reply(messages):
    return "".join(ch for ch in messages[-1]["content"] if ch.isdigit())
server = OpenAICompatServer(ScriptedPolicy(reply), models=["m"], delay=float(sys.argv[1])).start()
print(server.base_url, flush=True)
while True:
    time.sleep(3600)
"""


def bench_openai(repeats: int) -> list[tuple[str, float]]:
    process = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(LATENCY)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TOKENIZERS_PARALLELISM": "false"},
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        agent = agentsgym.make_agent("openai", base_url=base_url, model="m", max_retries=0)
        e = env(None)
        e.run_trial([{}] * 4, agent)  # warm the connection pool
        seconds = timed(lambda: e.run_trial([{}] * 64, agent, max_concurrency=64), repeats)
        agent.close()
    finally:
        process.kill()
        process.wait()
    return [("openai agent -> loopback server (own process), 64 episodes", seconds)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=["sync", "async", "openai"])
    args = parser.parse_args()
    rows: list[tuple[str, float]] = []
    if args.only in (None, "sync"):
        rows += bench_sync(args.repeats)
    if args.only in (None, "async"):
        rows += bench_async(args.repeats)
    if args.only in (None, "openai"):
        rows += bench_openai(args.repeats)
    print(f"ideal wall time: {IDEAL:.2f} s ({TURNS} turns x {LATENCY * 1000:.0f} ms)")
    print("| scenario | wall time | efficiency |")
    print("| --- | --- | --- |")
    for label, seconds in rows:
        print(f"| {label} | {seconds:.3f} s | {IDEAL / seconds:.2f} |")


if __name__ == "__main__":
    main()
