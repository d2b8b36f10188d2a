"""Asynchronous rollouts against synchronous training, side by side in one run.

    python bench/bench_async.py                       # sync, K=1, K=2; 12 steps each
    python bench/bench_async.py --steps 20 --median 0.1 --json async.json
    python bench/bench_async.py --plot docs/async-reward-vs-time.png async.json
    python bench/bench_async.py --real --seeds 0 --steps 24 --json real.json
    python bench/bench_async.py --real --engines transformers,vllm --seeds 0,1 --steps 12 \
        --vllm-python /path/to/vllm-venv --json vllm.json

``--real``: ``smollm2`` learning ``classical/QuickArithmetic-v0`` with
``per-token-grpo`` at the settings of ``bench/bench_real_model_learning.py`` (whose
task rows, held-out evaluation and generation clock it reuses), sync against
``--max-staleness 2``: held-out reward before and after the same steps (both through
the transformers agent, whoever generated in training), wall time per step, time in
weight sync per step, generation tokens/s and the machine's load. ``--engines``:
who generates while training, the trainer's own model in process (``transformers``)
and/or a vLLM server (``vllm``: started once with ``--vllm-python`` and shared by the
vLLM arms, each pushing its weights first; or ``--vllm-url``). The arms run
interleaved, every arm of seed 0 and then of seed 1, so that the machine's load falls
on all of them alike; each arm's result is written to ``--json`` as it comes in.

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
import contextlib
import json
import math
import os
import random
import statistics
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
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
        num_rollouts=args.num_rollouts or 4,
        tasks_per_step=args.tasks_per_step or 4,
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


def run_real(
    staleness: int | None,
    args: argparse.Namespace,
    engine: str = "transformers",
    *,
    clock: Any = None,
    vllm_url: str | None = None,
) -> dict[str, Any]:
    """smollm2 on QuickArithmetic (see the module docstring): held-out reward, time.

    ``engine``: who generates, the trainer's own model in process (``transformers``) or
    the vLLM server at ``vllm_url`` (``vllm``; the run's first push puts its weights
    there). ``clock`` (bench_real_model_learning's ``Clock``): count generation time and
    tokens while training."""
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
        num_rollouts=args.num_rollouts or NUM_ROLLOUTS,
        tasks_per_step=args.tasks_per_step or TASKS_PER_STEP,
        seed=args.seed,
        max_concurrency=32,
    )
    mode = "sync" if staleness is None else f"async K={staleness}"
    curve: list[tuple[float, float]] = []
    loads: list[float] = []
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

        def on_step(metrics: StepMetrics) -> None:
            curve.append((time.perf_counter() - started, metrics.mean_reward or 0.0))
            loads.append(os.getloadavg()[0])
            print(
                f"  {engine} {mode} seed {args.seed} step {metrics.step}: reward "
                f"{metrics.mean_reward:.3f}, {curve[-1][0]:.0f}s, load {loads[-1]:.1f}",
                flush=True,
            )

        with contextlib.ExitStack() as stack:
            generation = None
            if engine == "vllm":
                generation = stack.enter_context(vllm_engine(vllm_url, Path(out)))
            if clock is not None:
                clock.reset()
            started = time.perf_counter()
            result = trainer.train(
                source,
                max_steps=args.steps,
                on_step=on_step,
                max_staleness=staleness,
                agent=generation.agent if generation is not None else None,
                engine=generation,
            )
            wall = time.perf_counter() - started
        source.close()
        figures: dict[str, Any] = {}
        if clock is not None:  # read before the held-out evaluation generates too
            figures = {
                "generation_seconds": clock.generate,
                "generated_tokens": clock.generated_tokens,
                "generation_tokens_per_s": clock.generated_tokens / max(clock.generate, 1e-9),
            }
        after = held_out(out, tokenizer, args.seed)
    syncs = [s.extra.get("weight_sync_seconds", 0.0) for s in result.steps]
    return {
        "engine": engine,
        "mode": mode,
        "seed": args.seed,
        "steps": args.steps,
        "tasks_per_step": args.tasks_per_step or TASKS_PER_STEP,
        "num_rollouts": args.num_rollouts or NUM_ROLLOUTS,
        "seconds_per_step": wall / args.steps,
        "wall_seconds": wall,
        "weight_sync_seconds_per_step": statistics.fmean(syncs) if syncs else 0.0,
        **figures,
        "held_out": after,
        "load_mean": statistics.fmean(loads) if loads else None,
        "load_range": [min(loads), max(loads)] if loads else None,
        "audit": trainer.audit,
        "curve": curve,
    }


@contextlib.contextmanager
def vllm_engine(url: str | None, output_dir: Path) -> Iterator[Any]:
    """agentsgym-trl's vLLM generation attached to the server at ``url``, sampling as
    the learning bench does (the ``agentsgym train --vllm-server-base-url`` path)."""
    from agentsgym_trl.train_vllm import VLLMOptions, engine_sampling, vllm_generation
    from bench_real_model_learning import MAX_NEW_TOKENS, TEMPERATURE

    if url is None:
        raise SystemExit("--engines vllm needs --vllm-python or --vllm-url")
    with vllm_generation(
        VLLMOptions(base_url=url),
        served=lambda: output_dir,  # never called: the server is attached
        output_dir=output_dir,
        cpu=True,
        sampling=engine_sampling(TEMPERATURE, MAX_NEW_TOKENS, {}),
    ) as generation:
        yield generation


def run_real_arms(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every (engine, mode) arm for seed 0, then for seed 1...: the load falls on all
    alike. vLLM (one server for every vLLM arm) starts first; each arm's result is
    written to ``--json`` as soon as it is in."""
    from agentsgym.runtime import model_folder
    from agentsgym_trl.vllm_server import server_root, vllm_server
    from bench_real_model_learning import MODEL, Clock, held_out

    engines = args.engines.split(",")
    results: list[dict[str, Any]] = []
    clock = Clock()
    with contextlib.ExitStack() as stack:
        url = args.vllm_url
        if "vllm" in engines and url is None and args.vllm_python:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="vllm-")))
            server = vllm_server(
                args.vllm_python,
                model_folder(MODEL),
                log_path=folder / "vllm-server.log",
                serve_args=["--max-model-len", "2048"],
            )
            stack.enter_context(server)
            seconds = server.wait_ready(1800)
            print(f"vLLM ready after {seconds:.0f}s, load {os.getloadavg()[0]:.1f}", flush=True)
            url = server_root(server)
        for seed in [int(s) for s in args.seeds.split(",")]:
            args.seed = seed
            before = held_out(MODEL, agentsgym.load_tokenizer(MODEL), seed)
            print(f"seed {seed} before: {before}", flush=True)
            for engine in engines:
                for staleness in (None, 2):
                    result = run_real(staleness, args, engine, clock=clock, vllm_url=url)
                    result["held_out_before"] = before
                    results.append(result)
                    print(real_row(result), flush=True)
                    if args.json:
                        with open(args.json, "w", encoding="utf-8") as handle:
                            json.dump(results, handle, indent=1)
    return results


def real_row(r: dict[str, Any]) -> str:
    """One markdown row of a --real run (load: the mean of the 1-minute load at its steps)."""
    before, after = r.get("held_out_before") or {}, r["held_out"]
    tokens = r.get("generation_tokens_per_s")
    return (
        f"| {r['seed']} | {r['engine']} | {r['mode']} "
        f"| {before.get('sampled_reward', float('nan')):.2f} → {after['sampled_reward']:.2f} "
        f"| {before.get('greedy_reward', float('nan')):.2f} → {after['greedy_reward']:.2f} "
        f"| {r['seconds_per_step']:.1f} | {r['weight_sync_seconds_per_step']:.2f} "
        f"| {tokens if tokens is None else round(tokens)} | {r['load_mean']:.1f} "
        f"| {r['audit']['beyond_bound']} / {r['audit']['trained_tokens']} |"
    )


def plot(path: str, target: str) -> None:
    """Mean reward per step against wall time, one line per run (needs matplotlib); runs
    of several engines (``--engines``) get a second panel: time per step, its weight
    sync, and generation tokens/s, per arm over the seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(path, encoding="utf-8") as handle:
        results = json.load(handle)
    engines = any("engine" in result for result in results)
    figure, panels = plt.subplots(1, 2 if engines else 1, figsize=(12 if engines else 7, 4.5))
    axes = panels[0] if engines else panels
    seeds = sorted({result.get("seed", 0) for result in results})
    colors: dict[str, Any] = {}
    for result in results:
        times, rewards = zip(*result["curve"])
        smooth = [statistics.fmean(rewards[max(0, i - 4) : i + 1]) for i in range(len(rewards))]
        arm = f"{result['engine']} {result['mode']}" if engines else result["mode"]
        color = colors.setdefault(arm, f"C{len(colors)}")
        label = f"{arm} ({result['seconds_per_step']:.2f} s/step)"
        if len(seeds) > 1:
            label = f"{arm}, seed {result['seed']} ({result['seconds_per_step']:.0f} s/step)"
        style = "-" if result.get("seed", 0) == seeds[0] else "--"
        axes.plot(times, smooth, style, color=color, marker=".", label=label)
    axes.set_xlabel("wall time (s)")
    axes.set_ylabel("mean reward (last 5 steps)")
    real = any("held_out" in result for result in results)
    setting = "smollm2, QuickArithmetic" if real else "tiny model, lognormal tool latency"
    axes.set_title(f"per-token-grpo, {setting}")
    axes.legend(fontsize=7 if engines else None)
    if engines:
        _arm_bars(panels[1], results, colors)
    figure.tight_layout()
    figure.savefig(target, dpi=110)


def _arm_bars(axes: Any, results: list[dict[str, Any]], colors: dict[str, Any]) -> None:
    """Per arm, the mean over seeds: seconds per step (its weight-sync part hatched),
    annotated with generation tokens/s, the held-out reward after and the load."""
    for index, arm in enumerate(colors):
        runs = [r for r in results if f"{r['engine']} {r['mode']}" == arm]
        step = statistics.fmean(r["seconds_per_step"] for r in runs)
        sync = statistics.fmean(r["weight_sync_seconds_per_step"] for r in runs)
        tokens = statistics.fmean(r.get("generation_tokens_per_s", 0.0) for r in runs)
        after = statistics.fmean(r["held_out"]["sampled_reward"] for r in runs)
        load = statistics.fmean(r["load_mean"] for r in runs)
        axes.bar(index, step, color=colors[arm])
        axes.bar(index, sync, color="white", edgecolor="black", hatch="//", alpha=0.6)
        axes.text(
            index,
            step,
            f"{tokens:.0f} tok/s\nheld-out {after:.2f}\nload {load:.1f}",
            ha="center",
            va="bottom",
            fontsize=8,
        )
    axes.set_xticks(range(len(colors)), list(colors), fontsize=8)
    axes.set_ylabel("seconds per optimizer step (hatched: weight sync)")
    axes.set_title("per arm, mean over seeds")
    axes.margins(y=0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--num-tasks", type=int, default=16)
    parser.add_argument("--tasks-per-step", type=int, help="default 4 (--real: 4)")
    parser.add_argument("--num-rollouts", type=int, help="default 4 (--real: 8)")
    parser.add_argument("--median", type=float, default=0.05, help="median tool latency (s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--real", action="store_true", help="smollm2 on QuickArithmetic")
    parser.add_argument("--seeds", default="0", help="--real: the seeds, one after another")
    parser.add_argument(
        "--engines", default="transformers", help="--real: transformers, vllm or both (a,b)"
    )
    parser.add_argument("--vllm-python", help="--real: start vLLM with this python (or venv)")
    parser.add_argument("--vllm-url", help="--real: attach to this vLLM server instead")
    parser.add_argument("--json", help="write the results (curves included) here")
    parser.add_argument("--plot", help="draw this PNG from the --json file given as RESULTS")
    parser.add_argument("results", nargs="?", help="with --plot: a --json file")
    args = parser.parse_args()
    if args.plot:
        plot(args.results, args.plot)
        return
    if args.real:
        print(
            "| seed | engine | mode | held-out sampled | greedy | s / step | weight sync s / step "
            "| generation tokens/s | load | beyond the bound / trained tokens |",
            flush=True,
        )
        run_real_arms(args)
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
