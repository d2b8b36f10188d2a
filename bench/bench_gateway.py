"""The model gateway: token fidelity of recorded programs, overhead per call, memory.

Usage: python bench/bench_gateway.py [--part fidelity|overhead|memory|all] [--records PATH]
       python bench/bench_gateway.py --plot PNG --runs RUN.json ...   (runs from --json)

* fidelity: programs run through the gateway (agentsgym-gateway) in front of the
  loopback server of agentsgym-serve, which renders each request with a real tokenizer
  pack's chat template (with the request's tools) and reports prompt and completion ids
  as vLLM's ``return_token_ids`` does. Programs: a chat loop that keeps its history, a
  tool loop (three calls of a tool, then an answer; the scripted model writes its calls
  in the pack's own format, hermes ``<tool_call>`` or Llama-3's JSON, and the gateway's
  ``tool_parser="auto"`` reads them by the chat template), a program that truncates its
  history, and one that runs two sub-agent calls in parallel then a final call. Per
  (pack, program): rows per rollout (segments per episode), the share of loss tokens
  sampled by the backend, and duplicated supervised tokens; the recorded trajectories are written to ``--records``
  and checked by bench/check_gateway_records.py, which uses AutoTokenizer alone.
* overhead (``--levels 1,64,1000 [--delay S] [--prompt-tokens N] [--profile F] [--json F]``):
  the same chat call straight to an instant backend, through a bare proxy, and through
  the gateway, at each number of concurrent sessions, every session making its calls
  one after another; backend, bare proxy, gateway and each arm's load generator in
  processes of their own (bench/gateway_overhead.py). The backend answers canned ids
  at once, or after ``--delay`` seconds (a model's generation time; sessions then start
  spread over one delay). Per arm, latency p50 and p99; the gateway's overhead is its
  percentile minus the direct one; the gateway's own time per call (inside its app,
  less the backend's part) and the CPU per call of gateway, backend and client tell
  added work from queueing.
* memory (``--body-mb 15 [--repeats 5] [--gateway-src DIR]``): one call whose body is
  ``--body-mb`` MB (one long message, or 300 messages of 50 KB), sent to a fresh gateway in a
  process of its own in front of the instant backend; against the process before the
  call (after a warm-up call): the most Python memory held at once during it and what
  stays held (tracemalloc, in one process), and the process's RSS with the session
  open (it holds the call's record) and once it is closed (in another, untraced:
  tracemalloc's bookkeeping weighs on the RSS); medians of ``--repeats`` runs.
* ``--gateway-src DIR`` runs the gateway of the overhead and memory parts from another
  checkout's ``plugins/agentsgym_gateway/src`` (a "before"), side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from tokenizer_packs import has_pack, pack_path

PACKS = {"Qwen2.5": "qwen2.5-1.5b-instruct", "Llama-3.2": "llama-3.2-instruct", "Qwen3": "qwen3-4b"}
LLAMA_PACKS = {"Llama-3.2"}  # tool calls written as bare JSON with "parameters", not <tool_call>
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
def reply_for(pack: str) -> Any:
    """What the scripted model of ``pack`` says: a tool call in the template's own
    format (hermes ``<tool_call>``, or Llama-3's bare JSON) while a tool loop has called
    fewer than three tools, else a numbered sentence."""

    def reply(messages: list[dict[str, Any]]) -> str:
        if messages and messages[0].get("content", "").startswith("Use the add tool"):
            calls = sum(1 for m in messages if m["role"] in ("tool", "ipython"))
            if calls < 3:
                arguments = json.dumps({"a": calls + 1, "b": 2})
                if pack in LLAMA_PACKS:
                    return f'{{"name": "add", "parameters": {arguments}}}'
                return f'<tool_call>\n{{"name": "add", "arguments": {arguments}}}\n</tool_call>'
            return "The total is 12."
        return f"Reply number {len(messages)}: all is well."

    return reply


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
            tokenizer = agentsgym.load_tokenizer(str(pack_path(folder)))
            chat = agentsgym.runtime.ChatTokenizer(tokenizer)
            policy = ScriptedPolicy(reply_for(pack), tokenizer=str(pack_path(folder)))
            with (
                OpenAICompatServer(policy, models=[MODEL]) as server,
                ModelGateway(
                    server.base_url, tool_parser="auto", chat_template=tokenizer.chat_template
                ) as gateway,
            ):
                for name, program in PROGRAMS.items():
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
# The processes (backend, bare proxy, gateway, load generator) are bench/gateway_overhead.py.
PROCESSES = Path(__file__).resolve().parent / "gateway_overhead.py"
ARMS = ("direct", "hop", "gateway")
"""Straight to the backend; through a bare proxy (a raw ASGI app forwarding bytes over
aiohttp: the floor of any proxy in that place); through the gateway."""


ARM_SECONDS = 8.0
"""With a slow backend (``--delay``), a session makes at most this many seconds of
calls per arm and round."""


def _spawn(*args: str, python_path: Path | None = None) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if python_path is not None:  # first on the path: before the installed distribution
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(python_path), env.get("PYTHONPATH")]))
    process = subprocess.Popen(
        [sys.executable, str(PROCESSES), *args],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line:
        raise RuntimeError(f"bench/gateway_overhead.py {args[0]} did not start")
    return process, line


def _stop(process: subprocess.Popen) -> None:
    process.kill()
    process.wait()


def _load(url: str, keys: list[str], calls_each: int, stagger: float, seed: int) -> dict:
    """One arm's calls, from a load-generator process of their own."""
    command = [sys.executable, str(PROCESSES), "load", url, json.dumps(keys)]
    command += [str(calls_each), str(stagger), str(seed)]
    return json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)


def _control(root: str, command: str) -> dict[str, Any]:
    import httpx

    return httpx.get(f"{root}/_bench/{command}", timeout=60).json()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def overhead(
    levels: list[int],
    calls_total: int,
    delay: float,
    rounds: int,
    profile: Path | None,
    prompt_tokens: int = 40,
    gateway_src: Path | None = None,
) -> list[dict[str, Any]]:
    """Per level, ``rounds`` rounds of the three arms in turn, so that a change in the
    machine's load falls on all of them; about ``calls_total`` calls per arm
    (``gateway_src``: the gateway of another checkout)."""
    backend, backend_url = _spawn("backend", str(delay), str(prompt_tokens))
    hop, hop_url = _spawn("hop", backend_url)
    backend_root = backend_url.removesuffix("/v1")
    hop_root = hop_url.removesuffix("/v1")
    rows = []
    profiles: dict[int, str] = {}
    try:
        for sessions in levels:
            gateway, line = _spawn("gateway", backend_url, str(sessions), python_path=gateway_src)
            try:
                info = json.loads(line)
                urls = {"direct": backend_url, "hop": hop_url, "gateway": info["url"] + "/v1"}
                keys = {"direct": ["-"] * sessions, "hop": ["-"] * sessions}
                keys["gateway"] = info["keys"]
                calls_each = max(1, calls_total // (sessions * rounds))
                if delay > 0:  # a session's calls take ``delay`` each: bound the arm's time
                    calls_each = min(calls_each, max(1, int(ARM_SECONDS / delay)))
                for arm in ARMS:  # connections open, code paths warm
                    _load(urls[arm], keys[arm], 1, delay, seed=0)
                found: dict[str, Any] = {arm: {"latencies": [], "failed": 0} for arm in ARMS}
                cpu = {"client": 0.0, "backend": 0.0, "gateway": 0.0, "hop": 0.0}
                timings: dict[str, list[float]] = {"own_ms": [], "backend_ms": []}
                for index in range(rounds):
                    for arm in ARMS:
                        if arm == "hop":
                            hop_cpu = _control(hop_root, "cpu")["cpu"]
                        if arm == "gateway":
                            _control(info["url"], "reset")
                            backend_cpu = _control(backend_root, "cpu")["cpu"]
                            if profile is not None:
                                _control(info["url"], "profile-start")
                        result = _load(urls[arm], keys[arm], calls_each, delay, seed=index + 1)
                        found[arm]["latencies"] += result["latencies"]
                        found[arm]["failed"] += result["failed"]
                        if arm == "hop":
                            cpu["hop"] += _control(hop_root, "cpu")["cpu"] - hop_cpu
                        if arm != "gateway":
                            continue
                        if profile is not None:
                            profiles[sessions] = _control(info["url"], "profile-stop")["profile"]
                        cpu["backend"] += _control(backend_root, "cpu")["cpu"] - backend_cpu
                        stats = _control(info["url"], "stats")
                        cpu["gateway"] += stats["cpu"]
                        cpu["client"] += result["cpu"]
                        timings["own_ms"] += stats["own_ms"]
                        timings["backend_ms"] += stats["backend_ms"]
            finally:
                _stop(gateway)
            rows.append(_overhead_row(sessions, found, timings, cpu, profile is not None))
            print(json.dumps(rows[-1]), flush=True)
            if profile is not None:  # the last round's profile of each level
                profile.write_text("".join(f"# {n} sessions\n{t}\n" for n, t in profiles.items()))
    finally:
        _stop(hop)
        _stop(backend)
    return rows


def _overhead_row(
    sessions: int,
    found: dict[str, Any],
    timings: dict[str, list[float]],
    cpu: dict[str, float],
    profiled: bool,
) -> dict[str, Any]:
    """Latencies in ms per arm; overhead = gateway minus direct, per percentile (the
    calls of two arms cannot be paired); the gateway's own time per call (inside its
    app, less the backend's part) and its CPU per call; CPU under cProfile if
    ``profiled``."""
    calls = len(found["gateway"]["latencies"])
    row: dict[str, Any] = {"sessions": sessions, "calls per arm": calls, "profiled": profiled}
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        for arm in ARMS:
            row[f"{arm} {name} ms"] = 1000 * _percentile(found[arm]["latencies"], q)
        row[f"overhead {name} ms"] = row[f"gateway {name} ms"] - row[f"direct {name} ms"]
        row[f"over hop {name} ms"] = row[f"gateway {name} ms"] - row[f"hop {name} ms"]
        row[f"own {name} ms"] = _percentile(timings["own_ms"], q)
    row["backend part p50 ms"] = _percentile(timings["backend_ms"], 0.5)
    for part in ("gateway", "hop", "backend", "client"):
        row[f"{part} CPU ms/call"] = 1000 * cpu[part] / max(1, calls)
    row["failed"] = {arm: found[arm]["failed"] for arm in ARMS}
    return row


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no rows)"
    columns = list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    for row in rows:
        cells = [f"{v:.3g}" if isinstance(v, float) else str(v) for v in row.values()]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(runs: list[Path], path: Path) -> None:
    """Latency p50 of each arm, and the gateway's CPU per call, against sessions, for
    each ``--json`` file of ``runs`` (named by its file name)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (latency, cpu) = plt.subplots(1, 2, figsize=(11, 4.2))
    styles = ["--", "-", ":", "-."]
    colours = {"direct": "tab:gray", "hop": "tab:blue", "gateway": "tab:red"}
    names = {"direct": "direct", "hop": "bare proxy", "gateway": "gateway"}
    for position, run_path in enumerate(runs):
        rows = json.loads(run_path.read_text())["rows"]
        sessions = [row["sessions"] for row in rows]
        style = styles[position % len(styles)]
        for arm in ARMS:
            if arm == "direct" and position > 0:
                continue  # the same backend in every run: one line says it
            values = [row[f"{arm} p50 ms"] for row in rows]
            label = f"{names[arm]} ({run_path.stem})"
            latency.plot(sessions, values, style, marker="o", color=colours[arm], label=label)
        for part in ("gateway", "hop"):
            values = [row[f"{part} CPU ms/call"] for row in rows]
            label = f"{names[part]} ({run_path.stem})"
            cpu.plot(sessions, values, style, marker="o", color=colours[part], label=label)
    latency.set(xscale="log", yscale="log", xlabel="concurrent sessions", ylabel="p50 ms")
    latency.set_title("latency per call, instant backend")
    cpu.set(xscale="log", xlabel="concurrent sessions", ylabel="CPU ms per call", ylim=(0, None))
    cpu.set_title("CPU per call")
    for axes in (latency, cpu):
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


MEMORY_BODIES = {
    "one message": lambda size: [{"role": "user", "content": "x" * size}],
    "300 messages": lambda size: [
        {"role": "user" if i % 2 == 0 else "assistant", "content": "y" * (size // 300)}
        for i in range(300)
    ],
}
"""The bodies of the memory part: one long message, or a long conversation."""


def _one_large_call(
    backend_url: str, body: bytes, traced: bool, gateway_src: Path | None
) -> tuple[dict[str, float], dict[str, float]]:
    """One call of ``body`` through a fresh gateway process: what ``/_bench/measure``
    says with the session open, and once it is closed."""
    import time

    import httpx

    process, line = _spawn("memory", backend_url, "1" if traced else "0", python_path=gateway_src)
    try:
        started = json.loads(line)
        url = started["url"] + "/v1/chat/completions"
        headers = {"Authorization": f"Bearer {started['key']}"}
        warm_up = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
        httpx.post(url, json=warm_up, headers=headers, timeout=60).raise_for_status()
        _control(started["control"], "mark")
        headers["Content-Type"] = "application/json"
        httpx.post(url, content=body, headers=headers, timeout=600).raise_for_status()
        time.sleep(1.0)  # what runs once the answer is sent (freed memory given back)
        return _control(started["control"], "measure"), _control(started["control"], "close")
    finally:
        _stop(process)


def memory(body_mb: float, gateway_src: Path | None, repeats: int) -> list[dict[str, Any]]:
    """One large call through a gateway process per body and repeat (module docstring):
    the Python figures from a traced process, the RSS from an untraced one; medians."""
    size = int(body_mb * 2**20)
    backend, backend_url = _spawn("backend", "0", "40")
    rows = []
    try:
        for name, messages in MEMORY_BODIES.items():
            body = json.dumps({"model": MODEL, "messages": messages(size)}).encode()
            python = [_one_large_call(backend_url, body, True, gateway_src) for _ in range(repeats)]
            rss = [_one_large_call(backend_url, body, False, gateway_src) for _ in range(repeats)]

            def median(runs: list[Any], moment: int, key: str) -> float:
                return round(statistics.median(run[moment][key] for run in runs), 1)

            rows.append(
                {
                    "body": f"{name}, {len(body) / 2**20:.0f} MB",
                    "peak Python memory MB": median(python, 0, "peak_mb"),
                    "Python memory held, open / closed MB": (
                        f"{median(python, 0, 'held_mb')} / {median(python, 1, 'held_mb')}"
                    ),
                    "RSS, session open MB": median(rss, 0, "rss_mb"),
                    "RSS, session closed MB": median(rss, 1, "rss_mb"),
                    "RSS closed, each run": " ".join(f"{run[1]['rss_mb']:.0f}" for run in rss),
                }
            )
    finally:
        _stop(backend)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["fidelity", "overhead", "memory", "all"], default="all")
    parser.add_argument(
        "--records", type=Path, default=Path("/tmp/agentsgym-gateway-records.jsonl")
    )
    parser.add_argument("--rollouts", type=int, default=4)
    parser.add_argument("--levels", default="1,64,1000")
    parser.add_argument(
        "--calls", type=int, default=2000, help="calls per arm and level (at least 1 per session)"
    )
    parser.add_argument(
        "--delay", type=float, default=0.0, help="the backend's seconds per call (0: instant)"
    )
    parser.add_argument("--rounds", type=int, default=4, help="rounds of the three arms in turn")
    parser.add_argument(
        "--prompt-tokens", type=int, default=40, help="prompt ids in each backend answer"
    )
    parser.add_argument("--profile", type=Path, help="write the gateway's cProfile here")
    parser.add_argument("--json", type=Path, help="write the overhead rows here")
    parser.add_argument(
        "--plot",
        type=Path,
        help="only draw the --runs files (written by --json) against sessions into this PNG",
    )
    parser.add_argument("--runs", type=Path, nargs="+", default=[], help="runs for --plot")
    parser.add_argument("--body-mb", type=float, default=15.0, help="the memory part's body")
    parser.add_argument("--repeats", type=int, default=5, help="the memory part's runs per body")
    parser.add_argument(
        "--gateway-src",
        type=Path,
        help="the gateway of the overhead and memory parts from this folder (another "
        "checkout's plugins/agentsgym_gateway/src: a before)",
    )
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.plot is not None:
        plot(args.runs, args.plot)
        return
    if args.part in ("fidelity", "all"):
        print(_table(fidelity(args.records, args.rollouts)))
        print(f"records: {args.records} (python bench/check_gateway_records.py {args.records})")
    if args.part in ("overhead", "all"):
        levels = [int(level) for level in args.levels.split(",")]
        rows = overhead(
            levels,
            args.calls,
            args.delay,
            args.rounds,
            args.profile,
            args.prompt_tokens,
            args.gateway_src,
        )
        print(_table(rows))
        if args.json is not None:
            run = {"delay": args.delay, "prompt tokens": args.prompt_tokens, "rows": rows}
            args.json.write_text(json.dumps(run, indent=1))
    if args.part in ("memory", "all"):
        print(_table(memory(args.body_mb, args.gateway_src, args.repeats)))


if __name__ == "__main__":
    main()
