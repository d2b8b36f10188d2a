"""The cost of tokenizing tool turns: proportional to the new text, like user turns.

Usage: python bench/bench_tool_turns.py [--repeats N]

Episodes of 16 and 128 rounds of (a call written as the template writes it, its result
as a ``tool`` message), tokenized by the episode's stream (tool results as deltas)
and by the full-render reference of tests/reference_tokenization.py, on the tokenizer
packs of ../shared/tokenizers. Targets (as for user turns, issue 8): t(128)/t(16) <= 10
(linear is 8) and a 128-round episode's stream <= 8x one full render of it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import agentsgym
from agentsgym.tokenization import ChatTokenizer, EpisodeTokenizer
from agentsgym.types import AgentAction, Message
from agentsgym_tools import ScriptedToolAgent, as_tools
from reference_tokenization import ReferenceEpisodeTokenizer
from tokenizer_packs import has_pack, pack_path

PACKS = ["qwen2.5-1.5b-instruct", "llama-3.2-instruct", "qwen3-4b"]
ROUNDS = (16, 128)


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first term
        b: the second term
    """
    return a + b


def best(fn: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def script(writer: ScriptedToolAgent, rounds: int) -> list[tuple[str, list[Message]]]:
    """(reply text, the messages that follow it) per round."""
    turns = []
    for n in range(rounds):
        text = writer.write_calls([("add", {"a": n, "b": 1})])
        call = {
            "id": "call_0",
            "type": "function",
            "function": {"name": "add", "arguments": {"a": n, "b": 1}},
        }
        reply = Message(role="assistant", content="", tool_calls=[call])
        result = Message(role="tool", tool_call_id="call_0", name="add", content=str(n + 1))
        turns.append((text, [reply, result]))
    return turns


def tokenize(tokens: Any, turns: list[tuple[str, list[Message]]]) -> list[Message]:
    messages = [Message(role="user", content="Add up the numbers with the tool.")]
    tokens.add_env_turn(messages, list(messages))
    for text, (reply, result) in turns:
        tokens.add_agent_turn(AgentAction(text=text))
        messages += [reply, result]
        tokens.add_env_turn(messages, [result])
    return messages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    schemas = [t.schema for t in as_tools([add])]
    print(
        "| pack | stream 16 / 128 rounds (ms) | t(128)/t(16) | reference 128 (ms) | one render 128 (ms) | stream / one render |"
    )
    print("|---|---|---|---|---|---|")
    for pack in PACKS:
        if not has_pack(pack):
            print(f"| {pack} | absent | | | | |")
            continue
        tokenizer = agentsgym.load_tokenizer(str(pack_path(pack)))
        chat = ChatTokenizer(tokenizer).with_tools(schemas)
        writer = ScriptedToolAgent([], tokenizer)
        times, reference, render = {}, 0.0, 0.0
        for rounds in ROUNDS:
            turns = script(writer, rounds)
            stream = EpisodeTokenizer(chat)
            messages = tokenize(stream, turns)
            assert stream.whole_renders == 0 and len(stream.segments) == 1, pack
            times[rounds] = best(
                lambda c=chat, t=turns: tokenize(EpisodeTokenizer(c), t), args.repeats
            )
        reference = best(
            lambda c=chat, t=turns: tokenize(ReferenceEpisodeTokenizer(c), t),
            max(1, args.repeats // 2),
        )
        render = best(
            lambda k=tokenizer, m=messages: k.apply_chat_template(m, tools=schemas, tokenize=True),
            args.repeats,
        )
        print(
            f"| {pack} | {times[16] * 1e3:.1f} / {times[128] * 1e3:.1f} | {times[128] / times[16]:.1f} "
            f"| {reference * 1e3:.0f} | {render * 1e3:.1f} | {times[128] / render:.1f} |"
        )


if __name__ == "__main__":
    main()
