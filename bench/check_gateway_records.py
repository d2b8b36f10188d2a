"""An independent check of the gateway's recorded trajectories, with AutoTokenizer alone.

Usage: python bench/check_gateway_records.py [RECORDS.jsonl]

RECORDS.jsonl (default: bench_gateway.py's default ``--records``,
/tmp/agentsgym-gateway-records.jsonl) is what bench/bench_gateway.py writes: per episode, the tokenizer pack,
each call (messages, tools, the backend's prompt and completion ids) and the training
rows (token ids, agent mask) with each call's span. Nothing of agentsgym is imported:
the chat template is applied by transformers. For every call it checks that

1. the prompt ids the backend reported are ``apply_chat_template(messages, tools,
   add_generation_prompt=True)`` (tool-call arguments parsed to objects, as vLLM does,
   and arguments that are no JSON object made ``{}``, as vLLM 0.32 does);
2. in its row, the ids before its span are exactly that prompt, and the span holds
   exactly its completion ids, all with mask 1;

and for every episode that the mask is 1 on no other token (so no sampled token is
supervised twice, and nothing else is supervised).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from transformers import AutoTokenizer

DEFAULT_RECORDS = "/tmp/agentsgym-gateway-records.jsonl"


def _rendered(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as vLLM (0.32) hands them to the template: tool-call arguments parsed
    to an object, and arguments that are not a JSON object (or no JSON) made ``{}``."""
    out = []
    for message in messages:
        if message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                function = dict(call["function"])
                function["arguments"] = _arguments(function.get("arguments"))
                calls.append({**call, "function": function})
            message = {**message, "tool_calls": calls}
        out.append(message)
    return out


def _arguments(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return {}
    return arguments if isinstance(arguments, dict) else {}


def _template_ids(tokenizer: Any, messages: list, tools: list | None) -> list[int]:
    ids = tokenizer.apply_chat_template(
        _rendered(messages), tools=tools or None, add_generation_prompt=True, tokenize=True
    )
    if hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return list(ids)


def check(record: dict[str, Any], tokenizer: Any) -> list[str]:
    problems = []
    rows = record["rows"]
    covered = [set() for _ in rows]
    for index, (call, span) in enumerate(zip(record["calls"], record["spans"])):
        prompt, completion = call["prompt_token_ids"], call["completion_token_ids"]
        if _template_ids(tokenizer, call["messages"], call["tools"]) != prompt:
            problems.append(f"call {index}: the prompt ids are not the template's rendering")
        row, start, end = span
        ids, mask = rows[row]["token_ids"], rows[row]["agent_mask"]
        if ids[:start] != prompt:
            problems.append(f"call {index}: row {row} before its span is not its prompt")
        if ids[start:end] != completion or set(mask[start:end]) - {1}:
            problems.append(f"call {index}: row {row}'s span is not its completion, all mask 1")
        covered[row].update(range(start, end))
    for row, (data, spans) in enumerate(zip(rows, covered)):
        stray = [i for i, m in enumerate(data["agent_mask"]) if m and i not in spans]
        if stray:
            problems.append(f"row {row}: {len(stray)} supervised tokens no call sampled there")
    return problems


def main(path: str) -> int:
    tokenizers: dict[str, Any] = {}
    failures = total = 0
    with open(path) as lines:
        for number, line in enumerate(lines, 1):
            record = json.loads(line)
            name = record["tokenizer"]
            if name not in tokenizers:
                tokenizers[name] = AutoTokenizer.from_pretrained(name)
            total += 1
            problems = check(record, tokenizers[name])
            if problems:
                failures += 1
                print(f"episode {number} ({record['pack']}, {record['program']}): {problems}")
    print(f"{total - failures} of {total} episodes checked clean")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_RECORDS))
