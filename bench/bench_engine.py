"""The engine against a slow agent: does it keep a model server busy?

Usage: python bench/bench_engine.py [--repeats N] [--only sync|async|openai ...]

Every scenario plays episodes of exactly 10 turns (CountdownEnv from 10 to 1, the
agent always right) against an agent that takes 50 ms per reply, so the ideal wall
time is 10 x 50 ms = 0.5 s however many episodes run, as long as they all run at
once. Efficiency = ideal / measured (1.0 is perfect). Scenarios:

* sync:   a plain agent (time.sleep), 64 episodes, default settings (max_concurrency
          64), without a tokenizer and with the bundled one;
* async:  an async agent (asyncio.sleep), 256 episodes, max_concurrency=256: the env's
          plain hooks in worker threads (the default), the same env declaring
          ``run_hooks_inline = True`` (its turns on the event loop), and with the
          bundled tokenizer;
* openai: the OpenAI-compatible agent against the project's loopback server running
          in its own process (replies held 50 ms), 64 concurrent episodes.

The in-process scenarios are measured round-robin (every repeat runs each once), so
that a busy moment on a shared machine hits all of them; each keeps its best repeat.
The openai scenario runs after them, its repeats back to back (see bench_openai).

Targets (issue 8): sync >= 0.8, async >= 0.8, openai >= 0.7.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import agentsgym
from envs_for_tests import CountdownEnv

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


class InlineCountdownEnv(CountdownEnv):
    """CountdownEnv declaring what its hooks are: quick computation that never waits."""

    run_hooks_inline = True


def env(tokenizer: Any = None, cls: type[CountdownEnv] = CountdownEnv) -> CountdownEnv:
    return cls(
        tokenizer=agentsgym.load_tokenizer(tokenizer),
        env_config={"max_steps_per_episode": TURNS, "start": TURNS},
    )


def checked(batch: Any) -> None:
    assert not batch.failed, batch.failed[0].error
    assert all(e.num_turns == TURNS for e in batch.episodes)


Scenario = Callable[[], Any]


def sync_scenarios() -> dict[str, Scenario]:
    scenarios: dict[str, Scenario] = {}
    for label, tokenizer in (("no tokenizer", None), ("tiny-chatml", "agentsgym/tiny-chatml")):
        e = env(tokenizer)
        scenarios[f"sync agent, 64 episodes, defaults, {label}"] = lambda e=e: e.run_trial(
            [{}] * 64, SleepyAgent()
        )
    return scenarios


def async_scenarios() -> dict[str, Scenario]:
    scenarios: dict[str, Scenario] = {}
    for label, tokenizer, cls in (
        ("no tokenizer", None, CountdownEnv),
        ("no tokenizer, env sets run_hooks_inline", None, InlineCountdownEnv),
        ("tiny-chatml", "agentsgym/tiny-chatml", CountdownEnv),
    ):
        e = env(tokenizer, cls)
        scenarios[f"async agent, 256 episodes, max_concurrency=256, {label}"] = lambda e=e: (
            e.run_trial([{}] * 256, AsyncSleepyAgent(), max_concurrency=256)
        )
    return scenarios


SERVER = """
import sys, time
from agentsgym_serve.model_server import OpenAICompatServer, ScriptedPolicy
def reply(messages):
    return "".join(ch for ch in messages[-1]["content"] if ch.isdigit())
server = OpenAICompatServer(ScriptedPolicy(reply), models=["m"], delay=float(sys.argv[1])).start()
print(server.base_url, flush=True)
while True:
    time.sleep(3600)
"""


def bench_openai(repeats: int) -> dict[str, float]:
    """Measured on its own, after the others, with its repeats back to back: the agent's
    pooled connections would idle past the server's keep-alive during the other rows,
    and with max_retries=0 a request on a connection the server closed fails."""
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
        checked(e.run_trial([{}] * 4, agent))  # warm the connection pool
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            batch = e.run_trial([{}] * 64, agent, max_concurrency=64)
            best = min(best, time.perf_counter() - start)
            checked(batch)
        agent.close()
    finally:
        process.kill()
        process.wait()
    return {"openai agent -> loopback server (own process), 64 episodes": best}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=["sync", "async", "openai"], action="append")
    args = parser.parse_args()
    only = set(args.only or ["sync", "async", "openai"])
    scenarios: dict[str, Scenario] = {}
    if "sync" in only:
        scenarios.update(sync_scenarios())
    if "async" in only:
        scenarios.update(async_scenarios())
    best = {label: float("inf") for label in scenarios}
    for play in scenarios.values():  # warm up: first-use costs, threads
        checked(play())
    for _ in range(args.repeats):
        for label, play in scenarios.items():
            start = time.perf_counter()
            batch = play()
            best[label] = min(best[label], time.perf_counter() - start)
            checked(batch)
    if "openai" in only:
        best.update(bench_openai(args.repeats))
    print(f"ideal wall time: {IDEAL:.2f} s ({TURNS} turns x {LATENCY * 1000:.0f} ms)")
    print("| scenario | wall time | efficiency |")
    print("| --- | --- | --- |")
    for label, seconds in best.items():
        print(f"| {label} | {seconds:.3f} s | {IDEAL / seconds:.2f} |")


if __name__ == "__main__":
    main()
