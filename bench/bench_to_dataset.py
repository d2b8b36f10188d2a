"""Memory of TrajectoryBatch.to_dataset() against the arrow data it makes.

Usage: python bench/bench_to_dataset.py [--episodes N] [--tokens T] [--via-records]

Builds the batch of bench_batches.py (1,000 episodes of about 4,700 tokens by
default), then converts it, sampling the process's RSS every 2 ms: the RSS the
dataset still holds once the conversion is done, and the peak above the batch during
it, both against the arrow bytes of the dataset (target: at most 1.5x). Run it once
as it is and once with --via-records (what to_dataset did before 2026-11-25: the
records' Python lists through datasets.Dataset.from_list), each in a fresh process; both are warmed up on a small batch first, so the imports of
datasets and pyarrow are not counted.
"""

from __future__ import annotations

import argparse
import gc
import threading
import time
from pathlib import Path

from bench_batches import build

from agentsgym.trajectory import records_to_dataset


def rss() -> int:
    fields = Path("/proc/self/statm").read_text().split()
    return int(fields[1]) * 4096


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--tokens", type=int, default=4700)
    parser.add_argument("--via-records", action="store_true")
    args = parser.parse_args()
    batch = build(args.episodes, args.tokens, logprobs=False)
    build(8, 100, logprobs=False).to_dataset()  # imports datasets and pyarrow: not measured
    gc.collect()
    before = rss()
    peak, sampling = before, True

    def sample() -> None:
        nonlocal peak
        while sampling:
            peak = max(peak, rss())
            time.sleep(0.002)

    sampler = threading.Thread(target=sample)
    sampler.start()
    start = time.perf_counter()
    if args.via_records:
        dataset = records_to_dataset(batch.to_records())
    else:
        dataset = batch.to_dataset()
    seconds = time.perf_counter() - start
    sampling = False
    sampler.join()
    gc.collect()
    held, arrow = rss() - before, dataset.data.nbytes
    tokens = sum(e.num_tokens for e in batch.episodes)
    print(f"{len(dataset)} rows, {tokens / 1e6:.2f} M tokens, via records: {args.via_records}")
    print(f"| arrow data | {arrow / 2**20:.0f} MiB |")
    print(f"| RSS held after | +{held / 2**20:.0f} MiB ({held / arrow:.2f}x the arrow bytes) |")
    print(f"| peak RSS during | +{(peak - before) / 2**20:.0f} MiB ({(peak - before) / arrow:.2f}x) |")
    print(f"| time | {seconds:.2f} s |")


if __name__ == "__main__":
    main()
