"""Memory of a large batch and the cost of to_torch().

Usage: python bench/bench_batches.py [--episodes N] [--tokens T] [--logprobs]

Builds a TrajectoryBatch of N episodes of about T tokens (defaults 1,000 x 4,700, as
in issue 8), messages included (20 turns of realistic text, about 4 characters per
token), measures what it holds with tracemalloc against the ids' int32 bytes
(target <= 5x), and times to_torch() against a plain numpy padding of the same
fields (target <= 1.5x), side by side. For comparison it builds the same token
fields as Python lists, as trajectories held them before (2026-11-22).
"""

from __future__ import annotations

import argparse
import gc
import random
import time
import tracemalloc
from typing import Any

import numpy as np

from agentsgym.trajectory import (
    Episode,
    StepRecord,
    TokenSegment,
    TrajectoryBatch,
    TrajectoryGroup,
    rewards_array,
)

WORDS = "the agent asks whether the secret word is a kind of animal and the env answers".split()
TURNS = 20
ROLLOUTS = 8


def text(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


def make_episode(rng: random.Random, index: int, tokens: int, logprobs: bool) -> Episode:
    length = tokens + rng.randint(-200, 200)
    ids = [rng.randrange(150_000) for _ in range(length)]
    mask = [0] * length
    per_turn = length // TURNS
    for turn in range(TURNS):
        start = turn * per_turn + per_turn // 2
        for pos in range(start, start + per_turn // 4):
            mask[pos] = 1
    rewards = [0.25 if m else 0.0 for m in mask]
    episode = Episode(session_id=f"s{index}", env_id="x/Y-v0", task_data={"seed": index}, tokenized=True)
    episode.messages = [{"role": "system", "content": text(rng, 400)}]
    for _ in range(TURNS):
        episode.messages.append({"role": "user", "content": text(rng, per_turn * 3)})
        episode.messages.append({"role": "assistant", "content": text(rng, per_turn)})
    episode.steps = [
        StepRecord(action=m["content"], reward=0.0, done=False, info={"turn": i}, num_agent_tokens=per_turn // 4)
        for i, m in enumerate(episode.messages[2::2])
    ]
    episode.segments = [
        TokenSegment.from_lists(ids, mask, [-0.5 * m for m in mask] if logprobs else None)
    ]
    episode.segment_rewards = [rewards_array(rewards)]
    episode.has_logprobs = logprobs
    episode.final_reward = float(sum(rewards))
    episode.metrics = {"turns": float(TURNS)}
    return episode


def build(episodes: int, tokens: int, logprobs: bool) -> TrajectoryBatch:
    rng = random.Random(0)
    made = [make_episode(rng, i, tokens, logprobs) for i in range(episodes)]
    groups = [
        TrajectoryGroup(g, {"seed": g}, "x/Y-v0", [[e] for e in made[g * ROLLOUTS : (g + 1) * ROLLOUTS]], 0, True)
        for g in range((episodes + ROLLOUTS - 1) // ROLLOUTS)
    ]
    return TrajectoryBatch(groups)


def held_bytes(make: Any) -> tuple[Any, int]:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    value = make()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return value, after - before


def numpy_padding(batch: TrajectoryBatch) -> dict[str, np.ndarray]:
    """The minimal work: pad the same five fields into numpy arrays."""
    rows = [(e, 0) for e in batch.episodes]
    width = max(len(e.segments[0]) for e, _ in rows)
    out = {
        "ids": np.zeros((len(rows), width), np.int64),
        "attention": np.zeros((len(rows), width), np.int64),
        "mask": np.zeros((len(rows), width), np.int64),
        "rewards": np.zeros((len(rows), width), np.float32),
        "logprobs": np.zeros((len(rows), width), np.float32),
    }
    for r, (e, _) in enumerate(rows):
        s = e.segments[0]
        n = len(s)
        out["ids"][r, :n] = s.token_ids
        out["attention"][r, :n] = 1
        out["mask"][r, :n] = s.agent_mask
        out["rewards"][r, :n] = e.segment_rewards[0]
        if s.logprobs is not None:
            out["logprobs"][r, :n] = s.logprobs
    return out


def best_of(fn: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--tokens", type=int, default=4700)
    parser.add_argument("--logprobs", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    batch, held = held_bytes(lambda: build(args.episodes, args.tokens, args.logprobs))
    tokens = sum(e.num_tokens for e in batch.episodes)
    ids_bytes = tokens * 4
    arrays = sum(e.nbytes for e in batch.episodes)
    as_lists, list_bytes = held_bytes(
        lambda: [
            (e.segments[0].token_ids.tolist(), e.segments[0].agent_mask.tolist(),
             e.segments[0].logprobs_or_zeros().tolist(), e.segment_rewards[0].tolist())
            for e in batch.episodes
        ]
    )
    del as_lists
    import torch

    torch.set_num_threads(1)
    t_numpy = best_of(lambda: numpy_padding(batch), args.repeats)
    t_torch = best_of(batch.to_torch, args.repeats)
    print(f"{args.episodes} episodes, {tokens / args.episodes:.0f} tokens each, {tokens / 1e6:.2f} M tokens, logprobs {args.logprobs}")
    print("| measurement | figure |")
    print("| --- | --- |")
    print(f"| ids as int32 | {ids_bytes / 2**20:.1f} MiB |")
    print(f"| the batch, messages and steps included | {held / 2**20:.1f} MiB ({held / ids_bytes:.2f}x the ids) |")
    print(f"| of which token arrays (ids, mask, rewards, logprobs) | {arrays / 2**20:.1f} MiB |")
    print(f"| the same four token fields as Python lists | {list_bytes / 2**20:.1f} MiB ({list_bytes / ids_bytes:.1f}x the ids) |")
    print(f"| numpy padding of the five fields | {t_numpy * 1000:.0f} ms |")
    print(f"| to_torch() | {t_torch * 1000:.0f} ms ({t_torch / t_numpy:.2f}x numpy) |")


if __name__ == "__main__":
    main()
