"""The model gateway: token fidelity of recorded programs, and overhead per call.

Usage: python bench/bench_gateway.py [--part fidelity|overhead|all] [--records PATH]

* fidelity: programs run through the gateway (agentsgym-gateway) in front of the
  loopback server of agentsgym-serve, which renders each request with a real tokenizer
  pack's chat template (with the request's tools) and reports prompt and completion ids
  as vLLM's ``return_token_ids`` does. Programs: a chat loop that keeps its history, a
  tool loop (three calls of a tool, then an answer; the packs whose tool calls the
  gateway's hermes parser reads), a program that truncates its history, and one that
  runs two sub-agent calls in parallel then a final call. Per (pack, program): rows per
  rollout (segments per episode), the share of loss tokens sampled by the backend, and
  duplicated supervised tokens; the recorded trajectories are written to ``--records``
  and checked by bench/check_gateway_records.py, which uses AutoTokenizer alone.
* overhead: the same calls straight to the backend and through the gateway, at 1, 64
  and 1,000 concurrent sessions; backend and gateway each in their own process, the
  client in this one. Per-call latency p50 and p99 for both; the gateway's overhead is
  the difference.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from tokenizer_packs import has_pack, pack_path

PACKS = {"Qwen2.5": "qwen2.5-1.5b-instruct", "Llama-3.2": "llama-3.2-instruct", "Qwen3": "qwen3-4b"}
HERMES_PACKS = {"Qwen2.5", "Qwen3"}  # tool calls written as <tool_call> JSON </tool_call>
MODEL = "bench-model"
TINY = "agentsgym/tiny-chatml"
SYSTEM = {"role": "system", "content": "You are a careful assistant."}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
]
TURNS = 6


# ---------------------------------------------------------------- the programs
def reply_for(messages: list[dict[str, Any]]) -> str:
    """What the scripted model says: a tool call in the template's own format while a
    tool loop has called fewer than three tools, else a numbered sentence."""
    if messages and messages[0].get("content", "").startswith("Use the add tool"):
        calls = sum(1 for m in messages if m["role"] == "tool")
        if calls < 3:
            arguments = json.dumps({"a": calls + 1, "b": 2})
            return f'<tool_call>\n{{"name": "add", "arguments": {arguments}}}\n</tool_call>'
        return "The total is 12."
    return f"Reply number {len(messages)}: all is well."


def chat_loop(client: Any) -> None:
    messages = [SYSTEM, {"role": "user", "content": "Tell me a story, one line at a time."}]
    for turn in range(TURNS):
        answer = client.chat.completions.create(model=MODEL, messages=messages)
        messages += [
            {"role": "assistant", "content": answer.choices[0].message.content},
            {"role": "user", "content": f"And then ({turn})?"},
        ]


def truncating(client: Any) -> None:
    """Keeps the system prompt, its last reply and the new question: history dropped."""
    messages = [SYSTEM, {"role": "user", "content": "Tell me a story, one line at a time."}]
    for turn in range(TURNS):
        answer = client.chat.completions.create(model=MODEL, messages=messages)
        reply = {"role": "assistant", "content": answer.choices[0].message.content}
        messages = [*messages, reply, {"role": "user", "content": f"And then ({turn})?"}]
        if len(messages) > 4:
            messages = [SYSTEM, *messages[-3:]]


def parallel(client: Any) -> None:
    """Two sub-agents at once, then a final call that extends the first one's view."""
    views = [
        [SYSTEM, {"role": "user", "content": "Sub-task A: list the risks."}],
        [SYSTEM, {"role": "user", "content": "Sub-task B: list the benefits."}],
    ]
    answers: list[str] = ["", ""]

    def run(index: int) -> None:
        answer = client.chat.completions.create(model=MODEL, messages=views[index])
        answers[index] = answer.choices[0].message.content

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    final = [
        *views[0],
        {"role": "assistant", "content": answers[0]},
        {"role": "user", "content": f"Sub-agent B said: {answers[1]} Now decide."},
    ]
    client.chat.completions.create(model=MODEL, messages=final)


def tool_loop(client: Any) -> None:
    messages = [
        {"role": "system", "content": "Use the add tool for arithmetic, then answer."},
        {"role": "user", "content": "Add 1+2, 2+2 and 3+2, then sum them."},
    ]
    for _ in range(5):
        answer = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
        message = answer.choices[0].message
        if not message.tool_calls:
            return
        calls = [call.model_dump() for call in message.tool_calls]
        messages.append(
            {"role": "assistant", "content": message.content or "", "tool_calls": calls}
        )
        for call in message.tool_calls:
            result = sum(json.loads(call.function.arguments).values())
            messages.append({"role": "tool", "tool_call_id": call.id, "content": str(result)})


PROGRAMS = {
    "chat loop": chat_loop,
    "tool loop": tool_loop,
    "truncates history": truncating,
    "parallel calls": parallel,
}


# ---------------------------------------------------------------- fidelity
def fidelity(records_path: Path, rollouts: int) -> list[dict[str, Any]]:
    import openai

    import agentsgym
    from agentsgym_gateway import ModelGateway
    from agentsgym_gateway.episodes import episode_from_calls
    from agentsgym_serve.model_server import OpenAICompatServer, ScriptedPolicy

    results = []
    records_path.parent.mkdir(parents=True, exist_ok=True)
    with records_path.open("w") as records:
        for pack, folder in PACKS.items():
            if not has_pack(folder):
                print(f"skipping {pack}: no pack at {pack_path(folder)}")
                continue
            chat = agentsgym.ChatTokenizer(agentsgym.load_tokenizer(str(pack_path(folder))))
            policy = ScriptedPolicy(reply_for, tokenizer=str(pack_path(folder)))
            with (
                OpenAICompatServer(policy, models=[MODEL]) as server,
                ModelGateway(server.base_url, tool_parser="hermes") as gateway,
            ):
                for name, program in PROGRAMS.items():
                    if name == "tool loop" and pack not in HERMES_PACKS:
                        continue
                    episodes = []
                    for _ in range(rollouts):
                        session = gateway.open_session()
                        program(openai.OpenAI(base_url=session.base_url, api_key=session.api_key))
                        calls = gateway.close_session(session)
                        episode = episode_from_calls(
                            calls,
                            session_id=session.session_id,
                            env_id=name,
                            task_data={},
                            reward=1.0,
                            chat=chat,
                        )
                        episodes.append(episode)
                        records.write(
                            json.dumps(_record(pack, folder, name, calls, episode)) + "\n"
                        )
                    results.append(_fidelity_row(pack, name, episodes))
    return results


def _record(pack: str, folder: str, program: str, calls: list, episode: Any) -> dict[str, Any]:
    return {
        "pack": pack,
        "tokenizer": str(pack_path(folder)),
        "program": program,
        "calls": [
            {
                "messages": c.messages,
                "tools": c.tools,
                "text": c.text,
                "prompt_token_ids": c.prompt_token_ids,
                "completion_token_ids": c.completion_token_ids,
            }
            for c in calls
        ],
        "rows": [
            {"token_ids": s.token_ids.tolist(), "agent_mask": s.agent_mask.tolist()}
            for s in episode.segments
        ],
        "spans": [list(s.token_span) for s in episode.steps],
    }


def _fidelity_row(pack: str, program: str, episodes: list) -> dict[str, Any]:
    loss = sum(e.num_agent_tokens for e in episodes)
    sampled = sum(
        s.num_agent_tokens for e in episodes for s in e.steps if s.token_source == "server"
    )
    generated = sum(s.num_agent_tokens for e in episodes for s in e.steps)
    return {
        "pack": pack,
        "program": program,
        "calls per rollout": statistics.fmean(e.num_turns for e in episodes),
        "rows per rollout": statistics.fmean(len(e.segments) for e in episodes),
        "sampled share": sampled / loss if loss else 0.0,
        "duplicated tokens": loss - generated,
    }


# ---------------------------------------------------------------- overhead
SERVE_BACKEND = """
import sys, time
from agentsgym_serve.model_server import OpenAICompatServer, ScriptedPolicy
server = OpenAICompatServer(ScriptedPolicy(["ok, done."], tokenizer=sys.argv[1]), models=[sys.argv[2]])
server.start()
print(server.base_url, flush=True)
while True:
    time.sleep(3600)
"""
SERVE_GATEWAY = """
import json, sys, time
from agentsgym_gateway import ModelGateway
gateway = ModelGateway(sys.argv[1]).start()
keys = [gateway.open_session().api_key for _ in range(int(sys.argv[2]))]
print(json.dumps({"url": gateway.url + "/v1", "keys": keys}), flush=True)
while True:
    time.sleep(3600)
"""


def _spawn(code: str, *args: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


async def _load(url: str, keys: list[str], calls_each: int) -> tuple[list[float], int]:
    """Per-call latencies of the calls that succeeded, and how many failed."""
    import httpx

    body = {"model": MODEL, "messages": [SYSTEM, {"role": "user", "content": "Say ok."}]}
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    latencies: list[float] = []
    failed = 0
    async with httpx.AsyncClient(limits=limits, timeout=600) as client:

        async def session(key: str) -> None:
            nonlocal failed
            headers = {"Authorization": f"Bearer {key}"}
            for _ in range(calls_each):
                start = time.perf_counter()
                try:
                    answer = await client.post(
                        f"{url}/chat/completions", json=body, headers=headers
                    )
                    answer.raise_for_status()
                except httpx.HTTPError:
                    failed += 1
                    continue
                latencies.append(time.perf_counter() - start)

        await asyncio.gather(*(session(k) for k in keys))
    return latencies, failed


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def overhead(levels: list[int], calls_total: int) -> list[dict[str, Any]]:
    backend, backend_url = _spawn(SERVE_BACKEND, TINY, MODEL)
    rows = []
    try:
        for sessions in levels:
            gateway, line = _spawn(SERVE_GATEWAY, backend_url, str(sessions))
            try:
                info = json.loads(line)
                calls_each = max(2, calls_total // sessions)
                asyncio.run(_load(backend_url, ["unused"] * sessions, 1))  # warm both
                asyncio.run(_load(info["url"], info["keys"], 1))
                direct, direct_failed = asyncio.run(
                    _load(backend_url, ["unused"] * sessions, calls_each)
                )
                through, through_failed = asyncio.run(_load(info["url"], info["keys"], calls_each))
            finally:
                gateway.kill()
                gateway.wait()
            row: dict[str, Any] = {"sessions": sessions, "calls": len(through)}
            row["failed (direct, gateway)"] = f"{direct_failed}, {through_failed}"
            for name, q in (("p50", 0.5), ("p99", 0.99)):
                row[f"direct {name} ms"] = 1000 * _percentile(direct, q)
                row[f"gateway {name} ms"] = 1000 * _percentile(through, q)
                row[f"overhead {name} ms"] = row[f"gateway {name} ms"] - row[f"direct {name} ms"]
            rows.append(row)
            print(row, flush=True)
    finally:
        backend.kill()
        backend.wait()
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no rows)"
    columns = list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    for row in rows:
        cells = [f"{v:.3g}" if isinstance(v, float) else str(v) for v in row.values()]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["fidelity", "overhead", "all"], default="all")
    parser.add_argument(
        "--records", type=Path, default=Path("/tmp/agentsgym-gateway-records.jsonl")
    )
    parser.add_argument("--rollouts", type=int, default=4)
    parser.add_argument("--levels", default="1,64,1000")
    parser.add_argument(
        "--calls", type=int, default=2000, help="calls per level (at least 2 per session)"
    )
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.part in ("fidelity", "all"):
        print(_table(fidelity(args.records, args.rollouts)))
        print(f"records: {args.records} (python bench/check_gateway_records.py {args.records})")
    if args.part in ("overhead", "all"):
        levels = [int(level) for level in args.levels.split(",")]
        print(_table(overhead(levels, args.calls)))


if __name__ == "__main__":
    main()
