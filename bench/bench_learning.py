"""Does training learn? Reward curves of each trainer on a trivially learnable env.

    python bench/bench_learning.py                       # both trainers
    python bench/bench_learning.py --trainer per-token-grpo --steps 40
    python bench/bench_learning.py --json curves.json    # the curves as JSON

The env is GuessTheNumber between 1 and 5 with two guesses and the same hidden
number (4) in every task: a policy that answers ``[4]`` first always wins. The
model is the tiny Qwen2-shaped model warm-started on GuessTheNumber's answer format
(``build_tiny_model(warm_start="guess-number", high=5, seed=SEED)``): it answers
``[k]`` for ``k`` spread over 1..5 (how evenly depends on the seed), so it starts
near 0.2 mean reward (0.1-0.5 across seeds), and it ends its replies with
``<|im_end|>``. Each trainer runs at the CPU settings
docs/training.md gives for the tiny model. A trainer passes when the mean reward of
its last 5 steps is at least 0.9 and it still ends its replies with its end-of-turn
token (``truncated_replies``, the fraction of replies cut at the length limit, at
most 0.1 over the last 5 steps): a policy that learns to stop ending its turns and
run to the length limit while the env still pays (reward hacking; GuessTheNumber
finds ``[4]`` in a cut reply too) fails here. ``--set
mask_truncated_completions=false`` shows that hacking.

Figures go in bench/README.md, never in the tests.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from typing import Any

import torch

import agentsgym
from agentsgym.trainers import RolloutSource, StepMetrics
from agentsgym_trl.tiny_model import build_tiny_model

GUESS = "agentsgym/GuessTheNumber-v0"
TINY = "agentsgym/tiny-chatml"
HIGH, TARGET, GUESSES = 5, 4, 2
ENV_CONFIG = {"low": 1, "high": HIGH, "max_steps_per_episode": GUESSES}

# The CPU settings of docs/training.md ("Five minutes on a CPU") for the tiny model.
SETTINGS: dict[str, dict[str, Any]] = {
    "trl-grpo": {
        "learning_rate": 1e-3,
        "beta": 0.04,
        "scale_rewards": "none",
        "max_new_tokens": 16,
        "temperature": 1.0,
    },
    "per-token-grpo": {
        "learning_rate": 1e-3,
        "beta": 0.04,
        "advantage_normalization": "mean",
        "max_new_tokens": 16,
        "temperature": 1.0,
    },
}
NUM_ROLLOUTS, TASKS_PER_STEP = 8, 4


def rows(count: int = 16) -> list[dict[str, Any]]:
    return [
        {
            "env_class_path": GUESS,
            "env_config": ENV_CONFIG,
            "task_data": {"target": TARGET, "seed": i},
        }
        for i in range(count)
    ]


def run(trainer_name: str, steps: int, seed: int) -> list[StepMetrics]:
    tokenizer = agentsgym.load_tokenizer(TINY)
    model = build_tiny_model(tokenizer, warm_start="guess-number", high=HIGH, seed=seed)
    source = RolloutSource(
        rows(),
        tokenizer=tokenizer,
        num_rollouts=NUM_ROLLOUTS,
        tasks_per_step=TASKS_PER_STEP,
        seed=seed,
    )
    with tempfile.TemporaryDirectory() as out:
        trainer = agentsgym.runtime.make_trainer(
            trainer_name,
            model=model,
            tokenizer=tokenizer,
            output_dir=out,
            seed=seed,
            **SETTINGS[trainer_name],
        )

        def show(step: StepMetrics) -> None:
            print(
                f"  {trainer_name} step {step.step:3d}: reward {step.mean_reward:.3f}  "
                f"truncated {step.extra.get('truncated_replies', 0.0):.2f}  "
                f"loss {step.loss if step.loss is not None else float('nan'):+.4f}",
                flush=True,
            )

        try:
            result = trainer.train(source, max_steps=steps, on_step=show)
        finally:
            source.close()
    return result.steps


def summary(name: str, seed: int, steps: list[StepMetrics], seconds: float) -> dict[str, Any]:
    rewards = [s.mean_reward or 0.0 for s in steps]
    truncated = [s.extra.get("truncated_replies", 0.0) for s in steps]
    first, last = statistics.fmean(rewards[:5]), statistics.fmean(rewards[-5:])
    cut = statistics.fmean(truncated[-5:])
    return {
        "trainer": name,
        "seed": seed,
        "settings": SETTINGS[name],
        "steps": len(steps),
        "seconds": round(seconds, 1),
        "first5_reward": round(first, 3),
        "last5_reward": round(last, 3),
        "last5_truncated": round(cut, 3),
        "passed": last >= 0.9 and cut <= 0.1,
        "curve": [round(r, 3) for r in rewards],
        "truncated_curve": [round(t, 3) for t in truncated],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trainer", choices=[*SETTINGS, "both"], default="both")
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--seeds", default="0", help="comma-separated model/sampling seeds")
    parser.add_argument("--json", default=None, help="write the curves here")
    parser.add_argument(
        "--set", action="append", default=[], help="override a trainer setting: key=value (JSON)"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    names = list(SETTINGS) if args.trainer == "both" else [args.trainer]
    for pair in args.set:
        key, _, value = pair.partition("=")
        for name in names:
            SETTINGS[name][key] = json.loads(value)
    results = []
    for name in names:
        for seed in (int(x) for x in args.seeds.split(",")):
            started = time.perf_counter()
            steps = run(name, args.steps, seed)
            results.append(summary(name, seed, steps, time.perf_counter() - started))
    print()
    print(
        "| trainer | seed | steps | time | reward, first 5 -> last 5 steps "
        "| truncated replies, last 5 | pass |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        print(
            f"| {r['trainer']} | {r['seed']} | {r['steps']} | {r['seconds']} s | "
            f"{r['first5_reward']} -> {r['last5_reward']} | {r['last5_truncated']} | "
            f"{'yes' if r['passed'] else 'NO'} |"
        )
    print()
    for r in results:
        settings = ", ".join(f"{k}={v}" for k, v in r["settings"].items())
        print(f"{r['trainer']} ({settings}), seed {r['seed']}, every 5th step:")
        print("  reward    " + " ".join(f"{x:.2f}" for x in r["curve"][4::5]))
        print("  truncated " + " ".join(f"{x:.2f}" for x in r["truncated_curve"][4::5]))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=1)


if __name__ == "__main__":
    main()
