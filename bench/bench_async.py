"""Asynchronous rollouts against synchronous training, side by side in one run.

    python bench/bench_async.py                       # sync, K=1, K=2; 12 steps each
    python bench/bench_async.py --steps 20 --median 0.1 --json async.json
    python bench/bench_async.py --plot docs/async-reward-vs-time.png async.json
    python bench/bench_async.py --real --seed 0 --steps 24 --json real.json

``--real``: ``smollm2`` learning ``classical/QuickArithmetic-v0`` with
``per-token-grpo`` at the settings of ``bench/bench_real_model_learning.py`` (whose
task rows and held-out evaluation it reuses), sync against ``--max-staleness 2``:
held-out reward after the same steps, and wall time.

The env is GuessTheNumber (1..5, two guesses) behind a slow tool: every env step
waits a lognormal latency (median ``--median`` seconds, sigma 1.29, so the p99 is
about 20x the median), drawn from a generator seeded by the task and the step, so
every mode meets the same latencies. The trainer is ``per-token-grpo`` on the tiny
model warm-started on the answer format, at the CPU settings of docs/training.md;
each mode trains ``--steps`` optimizer steps of ``--tasks-per-step`` tasks x
``--num-rollouts`` rollouts from the same seed.

Reported per mode: wall time per optimizer step (the run's wall time over its
steps), the speed-up over sync, the mean reward of the last 5 steps, the step log's
largest staleness, and the staleness audit: every trained agent token's recorded
policy version (``policy_versions`` of the batch) against the trainer's version at
the update; tokens beyond the bound (and tokens without a version) are counted.

Figures go in bench/README.md (and the reward-against-wall-time plot in docs/),
never in the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import statistics
import time
import zlib
from typing import Any

import numpy as np
import torch

import agentsgym
from agentsgym import StepResult, hookimpl
from agentsgym.trainers import RolloutSource, StepMetrics
from agentsgym_classical.guess_number import GuessTheNumberEnv
from agentsgym_trl import PerTokenGRPOTrainer
from agentsgym_trl.tiny_model import build_tiny_model

TINY = "agentsgym/tiny-chatml"
SIGMA = math.log(20.0) / 2.326  # p99 / median = exp(2.326 sigma) = 20
ENV_CONFIG = {"low": 1, "high": 5, "max_steps_per_episode": 2}


class SlowToolGuessEnv(GuessTheNumberEnv):
    """GuessTheNumber whose every step waits a lognormal tool latency (seeded)."""

    run_hooks_inline = False
    median_seconds = 0.05

    @hookimpl
    async def step_episode(self, state: Any, action: str) -> StepResult:
        seed = zlib.crc32(f"{state.target}/{len(state.guesses)}/{action}".encode())
        latency = random.Random(seed).lognormvariate(math.log(self.median_seconds), SIGMA)
        await asyncio.sleep(latency)
        return GuessTheNumberEnv.step_episode(self, state, action)


class AuditedTrainer(PerTokenGRPOTrainer):
    """per-token-grpo that audits each trained batch's token versions before updating."""

    def __init__(self, *args: Any, bound: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bound = bound
        self.updates = 0
        self.audit = {"trained_tokens": 0, "beyond_bound": 0, "unversioned": 0}

    def consume(self, batch: Any) -> dict[str, float]:
        if len(batch):
            arrays = batch.padded_arrays()
            agent = arrays["agent_token_mask"].astype(bool)
            versions = arrays["policy_versions"][agent]
            self.audit["trained_tokens"] += int(versions.size)
            self.audit["unversioned"] += int(np.count_nonzero(versions < 0))
            ages = self.updates - versions[versions >= 0]
            self.audit["beyond_bound"] += int(np.count_nonzero(ages > self.bound))
        metrics = super().consume(batch)
        self.updates += 1
        return metrics


def run(mode: str, staleness: int | None, args: argparse.Namespace) -> dict[str, Any]:
    torch.manual_seed(args.seed)
    tokenizer = agentsgym.load_tokenizer(TINY)
    SlowToolGuessEnv.median_seconds = args.median
    rows = [
        {
            "env_class_path": f"{__name__}:SlowToolGuessEnv",
            "env_config": ENV_CONFIG,
            "task_data": {"target": 4, "seed": seed},
        }
        for seed in range(args.num_tasks)
    ]
    model = build_tiny_model(tokenizer, warm_start="guess-number", high=5, seed=args.seed)
    trainer = AuditedTrainer(
        model,
        tokenizer=tokenizer,
        output_dir=None,
        learning_rate=1e-3,
        beta=0.04,
        advantage_normalization="mean",
        max_new_tokens=16,
        seed=args.seed,
        bound=staleness or 0,
    )
    source = RolloutSource(
        rows,
        tokenizer=tokenizer,
        num_rollouts=args.num_rollouts,
        tasks_per_step=args.tasks_per_step,
        allow_class_paths=True,
        seed=args.seed,
    )
    curve: list[tuple[float, float]] = []
    started = time.perf_counter()

    def on_step(metrics: StepMetrics) -> None:
        curve.append((time.perf_counter() - started, metrics.mean_reward or 0.0))

    result = trainer.train(source, max_steps=args.steps, on_step=on_step, max_staleness=staleness)
    wall = time.perf_counter() - started
    source.close()
    logs = [s.to_dict() for s in result.steps]
    return {
        "mode": mode,
        "seconds_per_step": wall / args.steps,
        "wall_seconds": wall,
        "last5_reward": statistics.fmean(r for _, r in curve[-5:]),
        "staleness_max": max((s.get("staleness_max", 0.0) for s in logs), default=0.0),
        "staleness_mean": statistics.fmean(s.get("staleness_mean", 0.0) for s in logs),
        "audit": trainer.audit,
        "curve": curve,
    }


def run_real(staleness: int | None, args: argparse.Namespace) -> dict[str, Any]:
    """smollm2 on QuickArithmetic (see the module docstring): held-out reward and time."""
    import tempfile

    from bench_real_model_learning import (
        MAX_NEW_TOKENS,
        MODEL,
        NUM_ROLLOUTS,
        SETTINGS,
        TASKS_PER_STEP,
        TEMPERATURE,
        held_out,
        rows,
    )

    torch.manual_seed(args.seed)
    tokenizer = agentsgym.load_tokenizer(MODEL)
    source = RolloutSource(
        rows("train"),
        tokenizer=tokenizer,
        num_rollouts=NUM_ROLLOUTS,
        tasks_per_step=TASKS_PER_STEP,
        seed=args.seed,
        max_concurrency=32,
    )
    curve: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory(prefix="agentsgym-bench-async-") as out:
        trainer = AuditedTrainer(
            MODEL,
            tokenizer=tokenizer,
            output_dir=out,
            seed=args.seed,
            temperature=TEMPERATURE,
            max_new_tokens=MAX_NEW_TOKENS,
            bound=staleness or 0,
            **SETTINGS["per-token-grpo"],
        )
        started = time.perf_counter()

        def on_step(metrics: StepMetrics) -> None:
            curve.append((time.perf_counter() - started, metrics.mean_reward or 0.0))
            print(f"  step {metrics.step}: reward {metrics.mean_reward:.3f}", flush=True)

        trainer.train(source, max_steps=args.steps, on_step=on_step, max_staleness=staleness)
        wall = time.perf_counter() - started
        source.close()
        after = held_out(out, tokenizer, args.seed)
    return {
        "mode": "sync" if staleness is None else f"async K={staleness}",
        "seed": args.seed,
        "seconds_per_step": wall / args.steps,
        "wall_seconds": wall,
        "held_out": after,
        "audit": trainer.audit,
        "curve": curve,
    }


def plot(path: str, target: str) -> None:
    """Mean reward per step against wall time, one line per mode (needs matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(path, encoding="utf-8") as handle:
        results = json.load(handle)
    figure, axes = plt.subplots(figsize=(7, 4))
    for result in results:
        times, rewards = zip(*result["curve"])
        smooth = [statistics.fmean(rewards[max(0, i - 4) : i + 1]) for i in range(len(rewards))]
        label = f"{result['mode']} ({result['seconds_per_step']:.2f} s/step)"
        axes.plot(times, smooth, marker=".", label=label)
    axes.set_xlabel("wall time (s)")
    axes.set_ylabel("mean reward (last 5 steps)")
    real = any("held_out" in result for result in results)
    setting = "smollm2, QuickArithmetic" if real else "tiny model, lognormal tool latency"
    axes.set_title(f"per-token-grpo, {setting}")
    axes.legend()
    figure.tight_layout()
    figure.savefig(target, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--num-tasks", type=int, default=16)
    parser.add_argument("--tasks-per-step", type=int, default=4)
    parser.add_argument("--num-rollouts", type=int, default=4)
    parser.add_argument("--median", type=float, default=0.05, help="median tool latency (s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--real", action="store_true", help="smollm2 on QuickArithmetic")
    parser.add_argument("--json", help="write the results (curves included) here")
    parser.add_argument("--plot", help="draw this PNG from the --json file given as RESULTS")
    parser.add_argument("results", nargs="?", help="with --plot: a --json file")
    args = parser.parse_args()
    if args.plot:
        plot(args.results, args.plot)
        return
    if args.real:
        real = [run_real(None, args), run_real(2, args)]
        for r in real:
            print(
                f"| {r['seed']} | {r['mode']} | {r['held_out']['sampled_reward']:.2f} "
                f"| {r['held_out']['greedy_reward']:.2f} | {r['wall_seconds']:.0f} s "
                f"| {r['audit']['beyond_bound']} / {r['audit']['trained_tokens']} |"
            )
        if args.json:
            with open(args.json, "w", encoding="utf-8") as handle:
                json.dump(real, handle, indent=1)
        return
    torch.set_num_threads(1)
    results = [run("sync", None, args), run("async K=1", 1, args), run("async K=2", 2, args)]
    base = results[0]["seconds_per_step"]
    print(
        "| mode | s / step | speed-up | last-5 reward | staleness max | audit: beyond bound / trained tokens |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for r in results:
        audit = r["audit"]
        print(
            f"| {r['mode']} | {r['seconds_per_step']:.2f} | {base / r['seconds_per_step']:.2f}x "
            f"| {r['last5_reward']:.2f} | {r['staleness_max']:.0f} "
            f"| {audit['beyond_bound']} / {audit['trained_tokens']} "
            f"({audit['unversioned']} unversioned) |"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=1)


if __name__ == "__main__":
    main()
