"""The cost of tokenizing long episodes: linear in the episode, against the minimal work.

Usage: python bench/bench_tokenization.py [--pack qwen2.5-1.5b-instruct] [--repeats N]

GuessTheNumber episodes of 16, 128 and 256 turns (an agent that always guesses wrong,
so every episode runs to max_steps_per_episode), with a real tokenizer pack from
../shared/tokenizers. Measured side by side in one run:

* the whole episode through ``env.run_trial`` (instant agent), with the tokenizer and
  without one (the difference is the tokenization);
* the token stream alone: ``EpisodeTokenizer`` (cheap turns) and the full-render
  reference of tests/reference_tokenization.py, driven with the episode's turns;
* the minimal work: one ``apply_chat_template(final messages, tokenize=True)``.

Targets (issue 8): t(128 turns) / t(16 turns) <= 10 (linear would be 8) and a
128-turn episode's tokenization <= 8x one full render of its final messages.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import agentsgym  # noqa: E402
from agentsgym import FunctionAgent  # noqa: E402
from agentsgym.tokenization import ChatTokenizer, EpisodeTokenizer, supports_incremental  # noqa: E402
from agentsgym.types import AgentAction  # noqa: E402
from reference_tokenization import ReferenceEpisodeTokenizer  # noqa: E402
from tokenizer_packs import pack_path

TURNS = (16, 128, 256)


def wrong_guesser() -> FunctionAgent:
    return FunctionAgent(lambda messages, state: ("My guess is [0].", state))


def best(fn: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


_ENVS: dict[tuple[int, int], Any] = {}


def play(tokenizer: Any, turns: int) -> agentsgym.Episode:
    """One episode; the env (and its ChatTokenizer, probed once) is built once per size."""
    key = (id(tokenizer), turns)
    if key not in _ENVS:
        _ENVS[key] = agentsgym.make(
            "agentsgym/GuessTheNumber-v0",
            tokenizer=tokenizer,
            env_config={"max_steps_per_episode": turns},
        )
    batch = _ENVS[key].run_trial([{"seed": 1}], wrong_guesser(), max_concurrency=1)
    episode = batch.all_episodes[0]
    assert episode.ok and episode.num_turns == turns, episode.error
    return episode


def replay(tokens: Any, messages: list[dict[str, str]]) -> None:
    """Drive a token stream with an episode's turns (env message, reply, ...)."""
    first = 1 if messages[0]["role"] == "user" else 2
    tokens.add_env_turn(messages[:first], messages[:first])
    for at in range(first, len(messages), 2):
        tokens.add_agent_turn(AgentAction(text=messages[at]["content"]))
        if at + 1 < len(messages):
            tokens.add_env_turn(messages[: at + 2], messages[at + 1 : at + 2])
    tokens.finish(messages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pack", default="qwen2.5-1.5b-instruct")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(pack_path(args.pack)))
    chat = ChatTokenizer(tokenizer)
    print(f"pack {args.pack}; incremental turns: {supports_incremental(chat)}; best of {args.repeats}")
    rows = {}
    for turns in TURNS:
        episode = play(tokenizer, turns)
        messages = episode.messages
        ids = episode.full_token_ids
        check = EpisodeTokenizer(chat)
        replay(check, messages)
        assert check.current.token_ids == ids, "the replayed stream differs from the episode's"
        rows[turns] = {
            "tokens": len(ids),
            "episode": best(lambda t=turns: play(tokenizer, t), args.repeats),
            "episode, no tokenizer": best(lambda t=turns: play(None, t), args.repeats),
            "stream": best(lambda: replay(EpisodeTokenizer(chat), messages), args.repeats),
            "reference stream": best(
                lambda: replay(ReferenceEpisodeTokenizer(chat), messages),
                max(1, args.repeats // 2),
            ),
            "one full render": best(
                lambda: tokenizer.apply_chat_template(messages, tokenize=True),
                args.repeats,
            ),
        }
    columns = ["episode", "episode, no tokenizer", "stream", "reference stream", "one full render"]
    print("| turns | tokens | " + " | ".join(columns) + " |")
    for turns, row in rows.items():
        cells = " | ".join(f"{row[c] * 1000:.1f} ms" for c in columns)
        print(f"| {turns} | {row['tokens']} | {cells} |")
    for name in ("episode", "stream", "reference stream"):
        ratio = rows[128][name] / rows[16][name]
        print(f"{name}: t(128)/t(16) = {ratio:.1f}  (linear: 8, target <= 10)")
    tokenization = rows[128]["episode"] - rows[128]["episode, no tokenizer"]
    print(
        f"128 turns: stream / one full render = "
        f"{rows[128]['stream'] / rows[128]['one full render']:.1f}; episode's tokenization "
        f"(with - without tokenizer) / one full render = "
        f"{tokenization / rows[128]['one full render']:.1f}  (target <= 8)"
    )
    print(
        "per turn at 256 turns: stream "
        f"{rows[256]['stream'] / 256 * 1000:.2f} ms, reference "
        f"{rows[256]['reference stream'] / 256 * 1000:.2f} ms; with vs without tokenizer "
        f"{rows[256]['episode'] / rows[256]['episode, no tokenizer']:.2f}x"
    )


if __name__ == "__main__":
    main()
