"""Throughput of the model-backed agents and the trainer adapters on CPU.

    python bench/bench_agents.py            # all sections
    python bench/bench_agents.py --only transformers|openai|train

* transformers: GuessTheNumber played by the tiny random model, one request per
  generate call (batch_size=1) against the micro-batching queue (batch_size 8/16).
* openai: requests per second through the loopback OpenAI-compatible server with a
  scripted policy (the agent's own overhead: event loop, HTTP, parsing), sequential
  against concurrent.
* train: wall time of one step of trl-grpo and per-token-grpo (8 rollouts of
  GuessTheNumber, 2 turns, tiny warm-started model), excluding model building.

Figures go in bench/README.md; they are never asserted in tests. torch runs on one
intra-op thread (on a 2-core machine shared with other work this is the fastest).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from typing import Any

import torch

import agentsgym
from agentsgym_trl.tiny_model import build_tiny_model
from agentsgym_trl.transformers_agent import TransformersAgent

GUESS = "agentsgym/GuessTheNumber-v0"
TINY = "agentsgym/tiny-chatml"


def best_of(runs: int, fn: Any) -> float:
    return min(fn() for _ in range(runs))


def bench_transformers() -> None:
    tokenizer = agentsgym.load_tokenizer(TINY)
    model = build_tiny_model(tokenizer)
    env = agentsgym.make(GUESS, tokenizer=tokenizer, env_config={"max_steps_per_episode": 4})
    tasks = [{"seed": i} for i in range(16)]
    print("transformers agent: GuessTheNumber 16 tasks x 4 rollouts, 4 turns, 16 new tokens/turn")
    for batch_size in (1, 8, 16):
        agent = TransformersAgent(
            model, tokenizer=tokenizer, max_new_tokens=16, batch_size=batch_size, seed=0
        )
        runs = []
        for _ in range(3):
            before = dict(agent.stats)
            started = time.perf_counter()
            env.run_trial(tasks, agent, num_rollouts=4, max_concurrency=16)
            seconds = time.perf_counter() - started
            delta = {k: agent.stats[k] - before[k] for k in before}
            runs.append((seconds, delta))
        agent.close()
        seconds, delta = min(runs, key=lambda r: r[0])
        print(
            f"  batch_size={batch_size:2d}: {seconds:.2f}s, {64 / seconds:.1f} episodes/s, "
            f"{delta['generated_tokens'] / seconds:.0f} generated tokens/s, "
            f"{delta['requests'] / delta['batches']:.1f} prompts per generate call"
        )


def bench_openai() -> None:
    from agentsgym.agents import call_agent
    from agentsgym_serve.model_server import OpenAICompatServer, ScriptedPolicy

    tokenizer = agentsgym.load_tokenizer(TINY)
    with OpenAICompatServer(ScriptedPolicy(["[50]"], tokenizer=tokenizer), models=["m"]) as server:
        agent = agentsgym.make_agent(
            "openai", base_url=server.base_url, model="m", max_concurrency=16
        )
        messages = [{"role": "user", "content": "Guess."}]
        # get_action is a coroutine: plain threads call it as an env's code would
        call_agent(agent, messages, None)  # connect
        print("openai agent against the loopback server (scripted policy, token ids on)")
        count = 320
        for threads in (1, 16):

            def run(threads: int = threads) -> float:
                per_thread = count // threads
                started = time.perf_counter()
                workers = [
                    threading.Thread(
                        target=lambda: [call_agent(agent, messages, None) for _ in range(per_thread)]
                    )
                    for _ in range(threads)
                ]
                for worker in workers:
                    worker.start()
                for worker in workers:
                    worker.join()
                return time.perf_counter() - started

            seconds = best_of(3, run)
            print(
                f"  {threads:2d} calling threads: {count / seconds:.0f} requests/s "
                f"({seconds / count * 1000:.2f} ms per request)"
            )
        agent.close()


def bench_train() -> None:
    from agentsgym.trainers import RolloutSource
    from agentsgym_trl import PerTokenGRPOTrainer, TRLGRPOAdapter

    tokenizer = agentsgym.load_tokenizer(TINY)
    env = agentsgym.make(
        GUESS, tokenizer=tokenizer, env_config={"high": 3, "max_steps_per_episode": 2}
    )
    rows = list(env.get_train_dataset(size=8))
    print("one training step: 2 tasks x 4 rollouts of GuessTheNumber (high=3, 2 turns), tiny model")
    for name in ("trl-grpo", "per-token-grpo"):
        times = []
        for _ in range(3):
            model = build_tiny_model(tokenizer, warm_start="guess-number", high=3)
            source = RolloutSource(rows, tokenizer=tokenizer, num_rollouts=4, tasks_per_step=2)
            with tempfile.TemporaryDirectory() as out:
                if name == "trl-grpo":
                    adapter: Any = TRLGRPOAdapter(
                        model,
                        tokenizer=tokenizer,
                        output_dir=out,
                        max_new_tokens=8,
                        learning_rate=1e-3,
                    )
                else:
                    adapter = PerTokenGRPOTrainer(
                        model,
                        tokenizer=tokenizer,
                        output_dir=out,
                        max_new_tokens=8,
                        learning_rate=1e-3,
                    )
                started = time.perf_counter()
                result = adapter.train(source, max_steps=4)
                times.append((time.perf_counter() - started) / 4)
                assert result.num_steps == 4
        best, median = min(times) * 1000, statistics.median(times) * 1000
        print(
            f"  {name}: {best:.0f} ms per step (median {median:.0f} ms; rollouts, loss and "
            "optimizer step; 4 steps, saving the model included)"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=["transformers", "openai", "train"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()
    sections = {"transformers": bench_transformers, "openai": bench_openai, "train": bench_train}
    for name, fn in sections.items():
        if args.only in (None, name):
            fn()


if __name__ == "__main__":
    main()
