"""Token fidelity against a real vLLM server: rows and the server's own answers, recorded.

    python bench/bench_vllm_fidelity.py --vllm-python /path/to/vllm-venv [--records F]
    python bench/bench_vllm_fidelity.py --url http://127.0.0.1:8000 [--arms generate,chat]
    python bench/check_vllm_records.py [F] --model smollm2-folder   # the audit

Starts vLLM (``agentsgym_trl.vllm_server``: dev mode, ``--enable-scale-out``,
``--logprobs-mode processed_logprobs``, float32) on ``smollm2``'s folder with the
``smollm2-tools`` chat template (``--chat-template``, the template file agentsgym-trl
registers the name with; it renders a conversation without tools exactly as SmolLM2's
own) and vLLM's own tool parser (``--enable-auto-tool-choice --tool-call-parser
hermes``), or attaches to one started so (``--url``). A recording proxy
(bench/recording_proxy.py) sits between agentsgym and the server: the audit reads what
vLLM answered, byte for byte, not agentsgym's reading of it.

The arms, each played through the proxy (``--arms`` picks some):

* ``completions``, ``generate``: GuessTheNumber (1..100, up to 6 turns, 24-token
  replies, temperature 1.0), the ``openai`` agent token-in on ``/v1/completions`` and
  on vLLM's generate API;
* ``chat``: the same in chat mode (vLLM renders the conversation from text);
* ``tools-chat``: ``tools/Calculator-v0`` (3 turns, 128-token replies) in chat mode with ``tool_choice``
  ``required`` (smollm2 never calls a tool unasked; vLLM then constrains the reply to a
  hermes ``<tool_call>`` and its parser returns it as ``tool_calls``);
* ``logprobs``: ``classical/QuickArithmetic-v0`` on the generate API at the learning
  benches' settings (temperature 0.7, 16 tokens, 16 tasks x 4): the audit compares the
  sampler's logprobs with transformers' on the same tokens;
* ``gateway``: ``gateway/OpenAIToolLoop-v0``, the unmodified ``openai`` client tool
  loop, with the model gateway in front of vLLM;
* ``gateway-tools``, ``gateway-tools-stream``: a tool loop of the bench's own through
  the gateway (two calls with ``tool_choice`` ``required``, then ``auto``), without and
  with ``stream=True``;
* ``train``: one step of ``agentsgym train --trainer per-token-grpo
  --vllm-server-base-url`` (QuickArithmetic, 4 tasks x 8, temperature 0.7): its rows
  (``played.jsonl``) and the trainer's own comparison of its logprobs with the
  sampler's before the update (the step log's ``sampling_logp_diff_*``, ``is_ratio_*``).
  It pushes the updated weights, so it runs last.

Each arm is one line of ``--records`` (JSONL): the rows (``TrajectoryBatch.to_records``,
every segment a row), the proxy's exchanges of the arm, the tokenizer and model folders
and the sampling temperature. Figures go in bench/README.md, never in the tests.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import agentsgym
from agentsgym.runtime import model_folder
from agentsgym_gateway.examples import OpenAIToolLoopEnv
from agentsgym_gateway.programs import ProgramOutcome, ProgramRun
from agentsgym_trl.models import SMOLLM2_TOOLS_TEMPLATE
from agentsgym_trl.vllm_server import SERVED_MODEL, server_root, vllm_server
from recording_proxy import RecordingProxy

DEFAULT_RECORDS = "/tmp/agentsgym-vllm-records.jsonl"
SERVE_ARGS = [
    *("--max-model-len", "2048", "--chat-template", str(SMOLLM2_TOOLS_TEMPLATE)),
    *("--enable-auto-tool-choice", "--tool-call-parser", "hermes"),
    # a request that names no max_tokens (an unmodified program's) gets 96, not the
    # rest of the context
    *("--override-generation-config", '{"max_new_tokens": 96}'),
]
GENERATION_PATHS = ("/v1/completions", "/v1/chat/completions", "/inference/v1/generate")
GUESS = ("agentsgym/GuessTheNumber-v0", {"high": 100, "max_steps_per_episode": 6})


@dataclass(frozen=True)
class Arm:
    env: str
    env_config: dict[str, Any]
    tokenizer: str
    api: str
    tasks: int
    rollouts: int
    max_tokens: int
    temperature: float
    extra_body: dict[str, Any] = field(default_factory=dict)


ARMS: dict[str, Arm] = {
    "completions": Arm(*GUESS, "smollm2", "completions", 8, 2, 24, 1.0),
    "generate": Arm(*GUESS, "smollm2", "generate", 8, 2, 24, 1.0),
    "chat": Arm(*GUESS, "smollm2", "chat", 8, 2, 24, 1.0),
    "tools-chat": Arm(
        "tools/Calculator-v0",
        {"max_steps_per_episode": 3},
        "smollm2-tools",
        "chat",
        8,
        2,
        128,
        1.0,
        {"tool_choice": "required"},
    ),
    "logprobs": Arm("classical/QuickArithmetic-v0", {}, "smollm2", "generate", 16, 4, 16, 0.7),
    "gateway": Arm("gateway/OpenAIToolLoop-v0", {}, "smollm2-tools", "chat", 8, 1, 96, 1.0),
    "gateway-tools": Arm(
        f"{__name__}:ForcedToolLoopEnv", {}, "smollm2-tools", "chat", 8, 1, 128, 1.0
    ),
    "gateway-tools-stream": Arm(
        f"{__name__}:StreamedToolLoopEnv", {}, "smollm2-tools", "chat", 8, 1, 128, 1.0
    ),
}
TRAIN_ARGS = [
    *("--trainer", "per-token-grpo", "--model", "smollm2", "--max-steps", "1"),
    *("--num-tasks", "8", "--tasks-per-step", "4", "--num-rollouts", "8"),
    *("--temperature", "0.7", "--max-new-tokens", "16", "--save-steps", "0"),
]


# ---------------------------------------------------------------- the bench's tool loop
class ForcedToolLoopEnv(OpenAIToolLoopEnv):
    """gateway/OpenAIToolLoop-v0's task and tool, played by a loop that makes smollm2
    call the tool: ``tool_choice`` ``required`` on its first two calls, then ``auto``."""

    stream: ClassVar[bool] = False
    forced_calls: ClassVar[int] = 2

    def program(self, task_data: dict[str, Any]) -> Any:
        return self.tool_loop

    def tool_loop(self, run: ProgramRun) -> str:
        from openai import OpenAI

        from agentsgym_gateway.example_programs.openai_tool_loop import TOOLS, add

        client = OpenAI(base_url=run.base_url, api_key=run.api_key)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "Use the add tool for arithmetic, then answer."},
            {"role": "user", "content": run.input},
        ]
        content = ""
        for turn in range(self.forced_calls + 1):
            choice = "required" if turn < self.forced_calls else "auto"
            request = {"model": run.model, "messages": messages, "tools": TOOLS}
            request |= {"tool_choice": choice, "max_tokens": 128}
            if self.stream:
                content, calls = assembled(client.chat.completions.create(**request, stream=True))
            else:
                message = client.chat.completions.create(**request).choices[0].message
                content = message.content or ""
                calls = [c.model_dump() for c in message.tool_calls or []]
            if not calls:
                break
            messages.append({"role": "assistant", "content": content, "tool_calls": calls})
            for call in calls:
                try:
                    result = str(add(**json.loads(call["function"]["arguments"])))
                except (TypeError, ValueError) as exc:
                    result = f"error: {exc}"
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        return content

    def verify(self, task_data: dict[str, Any], workdir: Path, outcome: ProgramOutcome) -> float:
        expected = str(int(task_data["a"]) + int(task_data["b"]))
        return 1.0 if expected in str(outcome.result or "") else 0.0


class StreamedToolLoopEnv(ForcedToolLoopEnv):
    """The same loop with ``stream=True``: the gateway streams vLLM's events through."""

    stream: ClassVar[bool] = True


def assembled(stream: Any) -> tuple[str, list[dict[str, Any]]]:
    """A streamed chat reply's text and tool calls, put together from its deltas."""
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content.append(delta.content or "")
        for part in delta.tool_calls or []:
            call = calls.setdefault(
                part.index,
                {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
            )
            call["id"] = part.id or call["id"]
            if part.function is not None:
                call["function"]["name"] += part.function.name or ""
                call["function"]["arguments"] += part.function.arguments or ""
    return "".join(content), [calls[i] for i in sorted(calls)]


# ---------------------------------------------------------------- the arms
def play(name: str, arm: Arm, proxy: RecordingProxy) -> dict[str, Any]:
    """One arm through the proxy: its record line (rows, exchanges, settings)."""
    tokenizer = agentsgym.load_tokenizer(arm.tokenizer)
    env = agentsgym.make(
        arm.env, tokenizer=tokenizer, env_config=arm.env_config, allow_class_paths=True
    )
    tasks = list(env.get_eval_dataset()["task_data"][: arm.tasks])
    agent = agentsgym.make_agent(
        "openai",
        base_url=proxy.url + "/v1",
        model=SERVED_MODEL,
        api=arm.api,
        max_tokens=arm.max_tokens,
        temperature=arm.temperature,
        extra_body=arm.extra_body,
        max_retries=0,
        timeout=600,
    )
    proxy.tag = name
    started = time.perf_counter()
    try:
        batch = env.run_trial(tasks, agent, num_rollouts=arm.rollouts, max_concurrency=16)
    finally:
        agent.close()
        env.close()
    seconds = time.perf_counter() - started
    episodes = batch.all_episodes
    print(
        f"{name}: {len(episodes)} episodes ({len(batch.failed)} failed: "
        f"{[e.error for e in batch.failed][:2]}), {len(batch.to_records())} rows, "
        f"{seconds:.0f}s",
        flush=True,
    )
    return record(name, arm.tokenizer, arm.temperature, batch.to_records(), proxy, seconds)


def train_step(proxy: RecordingProxy) -> dict[str, Any]:
    """One per-token-grpo step with vLLM attached through the proxy (see the docstring)."""
    proxy.tag = "train"
    with tempfile.TemporaryDirectory(prefix="agentsgym-vllm-fidelity-") as folder:
        out = Path(folder) / "run"
        command = [
            str(Path(sys.executable).with_name("agentsgym")),
            *("train", "classical/QuickArithmetic-v0", "--output-dir", str(out)),
            *TRAIN_ARGS,
            *("--vllm-server-base-url", proxy.url),
        ]
        started = time.perf_counter()
        result = subprocess.run(command, check=False, capture_output=True, text=True, timeout=3600)
        seconds = time.perf_counter() - started
        if result.returncode:
            raise RuntimeError(
                f"the train arm failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
            )
        rows = [json.loads(line) for line in (out / "played.jsonl").read_text().splitlines()]
        step = json.loads((out / "train_log.jsonl").read_text().splitlines()[0])
    trainer = {k: v for k, v in step.items() if k.startswith(("sampling_logp_diff", "is_ratio"))}
    print(f"train: {len(rows)} rows, {seconds:.0f}s; the trainer's own comparison: {trainer}")
    line = record("train", "smollm2", 0.7, rows, proxy, seconds)
    line["trainer_step_log"] = step
    return line


def record(
    name: str, tokenizer: str, temperature: float, rows: list, proxy: RecordingProxy, seconds: float
) -> dict[str, Any]:
    exchanges = [e for e in proxy.take(name) if e["path"] in GENERATION_PATHS]
    return {
        "arm": name,
        "tokenizer": model_folder(tokenizer) or tokenizer,
        "model": model_folder("smollm2"),
        "temperature": temperature,
        "seconds": round(seconds, 1),
        "load_average": os.getloadavg(),
        "rows": rows,
        "exchanges": exchanges,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--vllm-python", help="start vLLM with this python (or venv)")
    where.add_argument("--url", help="attach to a vLLM server started as the docstring says")
    parser.add_argument("--arms", default=",".join([*ARMS, "train"]))
    parser.add_argument("--records", default=DEFAULT_RECORDS)
    args = parser.parse_args()
    names = args.arms.split(",")
    unknown = set(names) - {*ARMS, "train"}
    if unknown:
        parser.error(f"unknown arms {sorted(unknown)}; choose from {[*ARMS, 'train']}")
    with contextlib.ExitStack() as stack:
        if args.vllm_python:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="agentsgym-vllm-"))
            server = vllm_server(
                args.vllm_python,
                model_folder("smollm2"),
                log_path=Path(folder) / "vllm-server.log",
                serve_args=SERVE_ARGS,
            )
            stack.enter_context(server)
            print(f"vLLM ready after {server.wait_ready(1800):.0f}s", flush=True)
            url = server_root(server)
        else:
            url = args.url.rstrip("/").removesuffix("/v1")
        proxy = stack.enter_context(RecordingProxy(url))
        with open(args.records, "w") as records:
            for name in names:
                line = train_step(proxy) if name == "train" else play(name, ARMS[name], proxy)
                records.write(json.dumps(line) + "\n")
                records.flush()
    print(f"wrote {args.records}; load average (1, 5, 15 min) now {os.getloadavg()}")


if __name__ == "__main__":
    main()
