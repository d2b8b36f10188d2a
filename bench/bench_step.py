"""Step overhead on Twenty Questions: agentsgym against the raw TextArena loop.

Usage: python bench/bench_step.py [--episodes N] [--repeats N] [--tokenizer PATH]
                                  [--only raw|plain|tokenizer] [--profile FILE]

One instant scripted policy plays every episode: questions from a fixed list that the
offline rules gamemaster understands, then a guess on the 21st turn, so every episode
is exactly 21 steps in every loop. Side by side, in one process:

* raw:       TextArena's own ``TwentyQuestionsEnv``, ``reset``/``get_observation``/
             ``step`` in a plain loop: the minimal work. Its constructor builds an
             OpenRouter gamemaster (an API key and the network), so the env is made
             without it, the way agentsgym-twentyq does: TextArena's state machinery with
             a gamemaster callable answering from the same offline rules gamemaster;
* plain:     ``twentyq/TwentyQuestions-v0`` run by agentsgym without a tokenizer: default
             settings (``max_concurrency`` 64; with the offline gamemaster the env sets
             ``run_hooks_inline``, so its turns run on the event loop), at
             ``max_concurrency=1``, and with its turns handed to worker threads as for
             an env that does not set ``run_hooks_inline``;
* tokenizer: the defaults with the Qwen2.5 tokenizer pack (``--tokenizer``, default
             ../shared/tokenizers/qwen2.5-1.5b-instruct beside the repository), and at
             ``max_concurrency=1``.

The rows are measured round-robin (every repeat runs each row once) so that a busy
moment on a shared machine hits all of them; each row keeps its best repeat.

Targets (issue 8, point 4): plain (defaults) >= 0.3x raw steps/s; with the tokenizer a
step costs at most 2x one without. ``--profile FILE`` writes a cProfile of one default
run, tokenized with ``--only tokenizer``, else plain (read it with ``python -m pstats FILE``).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textarena.envs.TwentyQuestions.env import TwentyQuestionsEnv as TextArenaTwentyQuestions

import agentsgym
from agentsgym.engine import DEFAULT_MAX_CONCURRENCY
from agentsgym_twentyq.env import TwentyQuestionsEnv
from agentsgym_twentyq.gamemaster import RulesGamemaster
from agentsgym_twentyq.words import Secret, lookup_category

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from tokenizer_packs import pack_path

ENV_ID = "twentyq/TwentyQuestions-v0"
TURNS = 21  # the plugin's default max_steps_per_episode: twenty questions and a guess
QWEN = pack_path("qwen2.5-1.5b-instruct")
QUESTIONS = (
    "Is it a place?",
    "Does it start with 'a'?",
    "Does it have more than 5 letters?",
    "Is it one word?",
    "Does it contain the letter 'e'?",
    "Does it end in y?",
    "Does it come before 'm'?",
)
GUESS = "[apple]"
RAW = "raw TextArena loop"
PLAIN = "agentsgym, no tokenizer, defaults"
TOKENIZED = "agentsgym, {name}, defaults"


def policy(turn: int) -> str:
    """The reply on ``turn`` (0-based): a question, or the guess on the last turn."""
    return GUESS if turn >= TURNS - 1 else QUESTIONS[turn % len(QUESTIONS)]


class CountingQuestioner:
    """:func:`policy` as an agentsgym agent; the turn count is its agent state."""

    run_inline = True  # instant: no thread hop, as for the core's scripted agents

    def get_action(self, messages: Any, agent_state: Any) -> tuple[str, Any]:
        turn = agent_state or 0
        return policy(turn), turn + 1


# ---------------------------------------------------------------------- raw TextArena
def textarena_env() -> TextArenaTwentyQuestions:
    """TextArena's env without its constructor (no OpenRouter model), rules gamemaster."""
    env = TextArenaTwentyQuestions.__new__(TextArenaTwentyQuestions)
    env.hardcore = False
    env.max_turns = TURNS
    env.gamemaster_options = ["Yes", "No", "I don't know"]
    env.gamemaster_context = None
    env.gamemaster_history = []
    env.word_list = env._load_words()
    rules = RulesGamemaster()

    def gamemaster(prompt: str) -> str:
        # TextArena's prompt ends "Q: <action>\nOptions: ..."; answer that question.
        question = prompt.rsplit("\nQ: ", 1)[1].split("\nOptions: ", 1)[0]
        return rules.answer(question, env.secret).answer

    env.gamemaster = gamemaster
    return env


def run_raw(episodes: int) -> int:
    """The minimal loop; returns the number of steps taken."""
    env = textarena_env()
    steps = 0
    for seed in range(episodes):
        random.seed(seed)
        env.reset(num_players=1)
        # TextArena never clears the gamemaster's history on reset (its prompt would
        # grow across episodes); a fresh game starts with none.
        env.gamemaster_history = []
        env.secret = Secret(env.game_word, lookup_category(env.game_word))
        done, turn = False, 0
        while not done:
            env.get_observation()
            done, _ = env.step(policy(turn))
            turn += 1
        env.close()
        steps += turn
    return steps


# ---------------------------------------------------------------------- agentsgym
class ThreadedTwentyQuestions(TwentyQuestionsEnv):
    """The plugin's env with its turns handed to worker threads, as for any env that does
    not declare ``run_hooks_inline`` (for comparison)."""

    run_hooks_inline = False


def run_agentsgym(env: Any, task_list: list[dict[str, Any]], concurrency: int) -> int:
    batch = env.run_trial(task_list, CountingQuestioner(), max_concurrency=concurrency)
    assert not batch.failed, batch.failed[0].error
    assert all(e.num_turns == TURNS for e in batch.episodes)
    return sum(e.num_turns for e in batch.episodes)


def profile(env: Any, task_list: list[dict[str, Any]], path: str) -> None:
    """cProfile of one run on this thread's own loop (run_trial would run it on the
    background loop's thread, which cProfile does not see)."""
    profiler = cProfile.Profile()
    profiler.enable()
    batch = asyncio.run(env.arun_trial(task_list, CountingQuestioner()))
    profiler.disable()
    assert not batch.failed
    profiler.dump_stats(path)
    print(f"profile of the default run written to {path} (python -m pstats {path})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tokenizer", default=str(QWEN))
    parser.add_argument("--only", choices=["raw", "plain", "tokenizer"], action="append")
    parser.add_argument("--profile", metavar="FILE")
    args = parser.parse_args()
    only = set(args.only or ["raw", "plain", "tokenizer"])
    tasks = [{"seed": seed} for seed in range(args.episodes)]
    runs: dict[str, Callable[[], int]] = {}
    plain = tokenized = None
    if "raw" in only:
        runs[RAW] = lambda: run_raw(args.episodes)
    if "plain" in only:
        plain = agentsgym.make(ENV_ID)
        threaded = ThreadedTwentyQuestions()
        runs[PLAIN] = lambda: run_agentsgym(plain, tasks, DEFAULT_MAX_CONCURRENCY)
        runs["agentsgym, no tokenizer, max_concurrency=1"] = lambda: run_agentsgym(plain, tasks, 1)
        runs["agentsgym, no tokenizer, turns in worker threads"] = lambda: run_agentsgym(
            threaded, tasks, DEFAULT_MAX_CONCURRENCY
        )
    if "tokenizer" in only:
        if Path(args.tokenizer).exists() or args.tokenizer != str(QWEN):
            name = "Qwen2.5 tokenizer" if args.tokenizer == str(QWEN) else args.tokenizer
            tokenized = agentsgym.make(ENV_ID, tokenizer=args.tokenizer)
            runs[TOKENIZED.format(name=name)] = lambda: run_agentsgym(
                tokenized, tasks, DEFAULT_MAX_CONCURRENCY
            )
            runs[f"agentsgym, {name}, max_concurrency=1"] = lambda: run_agentsgym(
                tokenized, tasks, 1
            )
        else:
            print(f"skipping the tokenizer rows: no tokenizer pack at {QWEN}", file=sys.stderr)

    wall = {label: float("inf") for label in runs}  # seconds per step, best repeat
    cpu = {label: float("inf") for label in runs}
    for run in runs.values():  # warm up: imports, first-use caches
        run()
    for _ in range(args.repeats):  # round-robin, so that a busy moment hits every row
        for label, run in runs.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            steps = run()
            wall[label] = min(wall[label], (time.perf_counter() - start) / steps)
            cpu[label] = min(cpu[label], (time.process_time() - start_cpu) / steps)

    # On a shared machine the wall clock also counts time the OS gave to other
    # processes; the process's CPU time per step (all its threads) does not.
    print(f"{args.episodes} episodes x {TURNS} steps, best of {args.repeats}, round-robin")
    print("| loop | steps/s | us per step | x raw | CPU us per step | x raw (CPU) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label in runs:
        ratio = f"{wall[RAW] / wall[label]:.2f}" if RAW in wall else ""
        cpu_ratio = f"{cpu[RAW] / cpu[label]:.2f}" if RAW in cpu else ""
        print(
            f"| {label} | {1 / wall[label]:,.0f} | {wall[label] * 1e6:.0f} | {ratio} "
            f"| {cpu[label] * 1e6:.0f} | {cpu_ratio} |"
        )
    tokenized_label = next(
        (label for label in runs if label.endswith(", defaults") and label != PLAIN), None
    )
    if PLAIN in wall and tokenized_label is not None:
        print(
            f"a tokenized step costs {wall[tokenized_label] / wall[PLAIN]:.2f}x an untokenized "
            f"one ({cpu[tokenized_label] / cpu[PLAIN]:.2f}x in CPU time)"
        )
    if args.profile:  # the last selected loop: --only tokenizer profiles the tokenized one
        profiled = tokenized if "tokenizer" in only and tokenized is not None else plain
        if profiled is not None:
            profile(profiled, tasks, args.profile)


if __name__ == "__main__":
    main()
