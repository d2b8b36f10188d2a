"""An independent audit of rows recorded against a real vLLM server, with transformers alone.

Usage: python bench/check_vllm_records.py [RECORDS.jsonl] [--model FOLDER] [--json OUT]

RECORDS.jsonl (default: bench_vllm_fidelity.py's default ``--records``) holds, per arm,
the rows agentsgym wrote (every segment a row: ``full_token_ids``, ``agent_token_mask``,
``session_id``, ``segment_index``, ``step_infos``) and the exchanges a recording proxy
saw between agentsgym and vLLM (the request, and vLLM's answer as text, a stream's
events included). Nothing of agentsgym is imported: vLLM's answers are read here, and
the chat template is applied by transformers' AutoTokenizer. Per arm:

1. **Loss tokens sampled.** Each run of mask-1 tokens in a row (one agent turn) must
   be one exchange's sampled ids, and the ids before it in its row that exchange's
   prompt (the ids sent, token-in; the ``prompt_token_ids`` vLLM reports, chat). The
   share of loss tokens so matched must be 100%.
2. **Segments.** Rows per episode (token-in: one).
3. **Server-prompt mismatches.** An episode's turns are its mask-1 runs in order. A
   turn whose server prompt does not extend the previous turn's prompt and sampled ids
   is a mismatch: its span must lie in a new row (flagged), never in the row of the
   turn before (silent). A mismatch is told apart by whether the previous reply's text
   came back whole (other ids for the same text) or not (other text: a tool call the
   template re-writes). Splits where the server's prompt did extend are counted too,
   and so are the rows' own ``server_prompt_mismatch`` flags.
4. **Template.** Each chat request's prompt ids are ``apply_chat_template(messages,
   tools, add_generation_prompt=True)`` (tool-call arguments parsed, as vLLM does).
5. **Re-tokenization.** Token-in turns whose sampled ids would not survive a text round
   trip (``encode(decode(ids)) != ids``): what token-in saves.
6. **Logprobs** (``--model``: the served weights' folder). The sampler's logprob of
   every matched token against transformers' (``AutoModelForCausalLM``, float32, the
   arm's temperature) on the same ids: max and mean absolute difference, and the KL of
   the sampler from the trainer estimated on the sampled tokens (k1, the mean log
   ratio, and k3, the mean of ``r - 1 - log r``, ``r = p_trainer / p_sampler``).

Exit status 1 when a loss token is unmatched, a mismatch is silent, or a token-in
episode has more than one row.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from transformers import AutoTokenizer

from check_gateway_records import _template_ids

DEFAULT_RECORDS = "/tmp/agentsgym-vllm-records.jsonl"
TOKEN_IN_PATHS = ("/v1/completions", "/inference/v1/generate")


@dataclass
class Call:
    """One generation exchange as vLLM answered it."""

    path: str
    prompt: list[int]
    completion: list[int]
    logprobs: list[float] | None
    request: dict[str, Any]


def read_call(exchange: dict[str, Any]) -> Call | None:
    """The prompt, sampled ids and logprobs of one exchange (``None``: not a 200)."""
    if exchange["status"] != 200:
        return None
    request, text, path = exchange["request"], exchange["response"], exchange["path"]
    if text.lstrip().startswith("data:"):
        return _streamed(path, request, text)
    body = json.loads(text)
    choice = body["choices"][0]
    if path == "/inference/v1/generate":
        prompt = request["token_ids"]
    elif path == "/v1/completions":
        prompt = choice.get("prompt_token_ids") or request["prompt"]
    else:
        prompt = body["prompt_token_ids"]
    logprobs = choice.get("logprobs") or {}
    if "token_logprobs" in logprobs:
        values = logprobs["token_logprobs"]
    else:
        values = [item["logprob"] for item in logprobs.get("content") or []] or None
    return Call(path, list(prompt), list(choice["token_ids"]), values, request)


def _streamed(path: str, request: dict[str, Any], text: str) -> Call:
    prompt: list[int] = []
    ids: list[int] = []
    logprobs: list[float] = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("data:") or line == "data: [DONE]":
            continue
        event = json.loads(line[5:])
        prompt = event.get("prompt_token_ids") or prompt
        for choice in event.get("choices") or []:
            ids += choice.get("token_ids") or []
            logprobs += [
                item["logprob"] for item in (choice.get("logprobs") or {}).get("content") or []
            ]
    return Call(path, prompt, ids, logprobs if len(logprobs) == len(ids) else None, request)


def spans(mask: list[int]) -> list[tuple[int, int]]:
    """The runs of 1 in ``mask`` as ``(start, end)``."""
    runs, start = [], None
    for index, value in enumerate([*mask, 0]):
        if value and start is None:
            start = index
        elif not value and start is not None:
            runs.append((start, index))
            start = None
    return runs


def audit_arm(arm: dict[str, Any], tokenizer: Any) -> dict[str, Any]:
    calls = [c for c in map(read_call, arm["exchanges"]) if c is not None]
    index: dict[tuple, list[Call]] = defaultdict(list)
    for call in calls:
        index[(tuple(call.prompt), tuple(call.completion))].append(call)
    episodes: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in arm["rows"]:
        if row.get("error") is None and row.get("full_token_ids"):
            episodes[row["session_id"]].append(row)
    token_in = bool(calls) and all(c.path in TOKEN_IN_PATHS for c in calls)
    counts: dict[str, Any] = defaultdict(int)
    counts.update(arm=arm["arm"], token_in=token_in, episodes=len(episodes), calls=len(calls))
    matched_pairs: list[tuple[list[int], int, int, Call]] = []
    for rows in episodes.values():
        rows.sort(key=lambda r: r.get("segment_index") or 0)
        counts["rows"] += len(rows)
        counts["multi_row_episodes"] += len(rows) > 1
        turns: list[tuple[int, Call | None]] = []
        for number, row in enumerate(rows):
            ids = row["full_token_ids"]
            for start, end in spans(row["agent_token_mask"]):
                counts["loss_tokens"] += end - start
                found = index.get((tuple(ids[:start]), tuple(ids[start:end])))
                call = found[0] if found else None
                if call is not None:
                    counts["loss_tokens_matched"] += end - start
                    matched_pairs.append((ids, start, end, call))
                else:
                    counts["turns_unmatched"] += 1
                turns.append((number, call))
        flags = [bool(i.get("server_prompt_mismatch")) for r in rows[:1] for i in r["step_infos"]]
        counts["rows_flagged_turns"] += sum(flags)
        counts["turns"] += len(turns)
        for (row_before, before), (row_now, now) in itertools.pairwise(turns):
            if before is None or now is None:
                continue
            extends = now.prompt[: len(before.prompt) + len(before.completion)] == (
                before.prompt + before.completion
            )
            split = row_now != row_before
            if not extends:  # the previous reply's text came back as other ids, or other text
                sampled = tokenizer.decode(before.completion, skip_special_tokens=True)
                shown = tokenizer.decode(now.prompt[len(before.prompt) :])
                kind = "same_text" if shown.startswith(sampled) else "other_text"
                counts[f"mismatches_{kind}"] += 1
            counts["mismatches"] += not extends
            counts["mismatches_flagged"] += (not extends) and split
            counts["mismatches_silent"] += (not extends) and not split
            counts["splits_without_mismatch"] += extends and split
    for call in calls:
        if call.path == "/v1/chat/completions":
            counts["chat_prompts"] += 1
            rendered = _template_ids(tokenizer, call.request["messages"], call.request.get("tools"))
            counts["chat_prompts_as_template"] += rendered == call.prompt
        elif call.completion:
            counts["token_in_turns"] += 1
            text = tokenizer.decode(call.completion)
            counts["token_in_turns_retokenized_differently"] += (
                tokenizer.encode(text, add_special_tokens=False) != call.completion
            )
    counts["matched"] = matched_pairs
    return counts


def logprob_gaps(pairs: list, model: Any, temperature: float) -> dict[str, float]:
    """The sampler's logprobs against the model's at ``temperature``, on the same ids."""
    import torch

    gaps: list[float] = []
    ratios: list[float] = []
    pinned = 0
    cache: dict[tuple, Any] = {}
    for ids, start, end, call in pairs:
        if call.logprobs is None:
            continue
        key = tuple(ids)
        if key not in cache:
            with torch.no_grad():
                logits = model(torch.tensor([list(key)])).logits[0].float()
            cache = {key: torch.log_softmax(logits / temperature, dim=-1)}
        logps = cache[key]
        for position, sampled in zip(range(start, end), call.logprobs):
            own = float(logps[position - 1, ids[position]])
            gaps.append(abs(sampled - own))
            ratios.append(own - sampled)
            pinned += sampled == 0.0 and own < -1e-3
    if not gaps:
        return {}
    k3 = [math.exp(r) - 1.0 - r for r in ratios]
    return {
        "tokens": len(gaps),
        "max_abs_diff": max(gaps),
        "mean_abs_diff": sum(gaps) / len(gaps),
        "kl_k1": -sum(ratios) / len(ratios),
        "kl_k3": sum(k3) / len(k3),
        "sampler_logprob_0_trainer_below": pinned,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("records", nargs="?", default=DEFAULT_RECORDS)
    parser.add_argument("--model", help="the served weights' folder: compare the logprobs")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    model = None
    if args.model:
        import torch
        from transformers import AutoModelForCausalLM

        torch.set_num_threads(2)
        model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    tokenizers: dict[str, Any] = {}
    results, failed = [], False
    with open(args.records) as lines:
        for line in lines:
            arm = json.loads(line)
            name = arm["tokenizer"]
            if name not in tokenizers:
                tokenizers[name] = AutoTokenizer.from_pretrained(name)
            counts = audit_arm(arm, tokenizers[name])
            pairs = counts.pop("matched")
            if model is not None:
                counts["logprobs"] = logprob_gaps(pairs, model, arm["temperature"])
            if "trainer_step_log" in arm:
                step = arm["trainer_step_log"]
                counts["trainer_own"] = {
                    k: v for k, v in step.items() if k.startswith(("sampling_logp", "is_ratio"))
                }
            counts["load_average"] = arm.get("load_average")
            share = counts["loss_tokens_matched"] / max(counts["loss_tokens"], 1)
            counts["loss_tokens_sampled_share"] = share
            bad = share < 1.0 or counts["mismatches_silent"]
            bad = bad or (counts["token_in"] and counts["multi_row_episodes"])
            failed = failed or bool(bad)
            print(f"{'FAIL' if bad else 'ok  '} {json.dumps(dict(counts))}", flush=True)
            results.append(dict(counts))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
