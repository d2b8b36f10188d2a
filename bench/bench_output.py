"""Streaming output: what writing every trial as it finishes costs, and how fast a
journal is read back on --resume.

Usage: python bench/bench_output.py [--trials N] [--repeats N]

* the cost on the event loop's thread of handing one finished trial to the writer
  (``RunOutput.write_trial``: it must not stall the episodes in flight);
* the writer thread's throughput (rows built, encoded, appended, fsync every 2 s);
* reading a journal back (``scan_journal``, what --resume and finish-output do);
* writing the final parquet from the journal (``finish_output``);
* a whole run with and without streaming output: GuessTheNumber, bundled
  tokenizer, bisect agent, 64 tasks x 4 rollouts.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import agentsgym
from agentsgym.aio import run_sync
from agentsgym.engine import TrialJob, arun_jobs
from agentsgym.output import RunArguments, RunManifest, RunOutput, finish_output, scan_journal
from agentsgym.output.records import rollout_rows


def played_trials(count: int) -> tuple[list[TrialJob], dict]:
    env = agentsgym.make("agentsgym/GuessTheNumber-v0", tokenizer="agentsgym/tiny-chatml")
    jobs = [TrialJob(env, {"seed": i}, i, 0) for i in range(count)]
    results = run_sync(arun_jobs(jobs, agentsgym.make_agent("agentsgym/bisect"), max_concurrency=8))
    return jobs, results


def manifest(planned: int) -> RunManifest:
    return RunManifest.new(
        "rollout",
        RunArguments(
            env_id="agentsgym/GuessTheNumber-v0",
            num_tasks=planned,
            num_rollouts=1,
            agent="agentsgym/bisect",
        ),
        planned_trials=planned,
    )


def bench_streaming(jobs: list[TrialJob], results: dict, folder: Path, suffix: str) -> dict:
    out = folder / f"stream{suffix}"
    output = RunOutput(out, manifest(len(jobs)), mode="overwrite").open()
    handoff = []
    start = time.perf_counter()
    for job in jobs:
        t0 = time.perf_counter()
        output.write_trial(lambda job=job: rollout_rows(job, results[job.key]))
        handoff.append(time.perf_counter() - t0)
    output.finish()
    output.close()
    total = time.perf_counter() - start
    journal = out if suffix == ".jsonl" else out.with_name(out.name + ".journal.jsonl")
    size = out.stat().st_size
    handoff.sort()
    return {
        "handoff_p50_us": handoff[len(handoff) // 2] * 1e6,
        "handoff_p99_us": handoff[int(len(handoff) * 0.99)] * 1e6,
        "trials_per_s": len(jobs) / total,
        "bytes": size,
        "journal": journal,
    }


def bench_scan(path: Path, repeats: int) -> tuple[float, int]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        scan = scan_journal(path)
        times.append(time.perf_counter() - start)
    return min(times), len(scan.trials)


def bench_run(folder: Path, streaming: bool, repeats: int) -> float:
    env = agentsgym.make("agentsgym/GuessTheNumber-v0", tokenizer="agentsgym/tiny-chatml")
    agent = agentsgym.make_agent("agentsgym/bisect")
    jobs = [TrialJob(env, {"seed": t}, t, r) for t in range(64) for r in range(4)]
    times = []
    for attempt in range(repeats):
        start = time.perf_counter()
        if streaming:
            output = RunOutput(
                folder / f"run{attempt}.jsonl", manifest(len(jobs)), mode="overwrite"
            ).open()
            run_sync(
                arun_jobs(
                    jobs,
                    agent,
                    max_concurrency=8,
                    on_trial=lambda job, eps: output.write_trial(lambda: rollout_rows(job, eps)),
                )
            )
            output.finish()
            output.close()
        else:
            run_sync(arun_jobs(jobs, agent, max_concurrency=8))
        times.append(time.perf_counter() - start)
    return len(jobs) / min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    jobs, results = played_trials(args.trials)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for suffix in (".jsonl", ".parquet"):
            figures = bench_streaming(jobs, results, folder, suffix)
            print(
                f"stream {args.trials} trials to {suffix}: hand-off p50 "
                f"{figures['handoff_p50_us']:.1f} us, p99 {figures['handoff_p99_us']:.1f} us; "
                f"{figures['trials_per_s']:.0f} trials/s written and finished; "
                f"{figures['bytes'] / 1e6:.1f} MB"
            )
        jsonl = folder / "stream.jsonl"
        seconds, count = bench_scan(jsonl, args.repeats)
        size = jsonl.stat().st_size
        print(
            f"scan_journal: {count} trials, {size / 1e6:.1f} MB in {seconds * 1e3:.0f} ms "
            f"({size / 1e6 / seconds:.0f} MB/s)"
        )
        # finish-output of a parquet run from its journal
        out = folder / "fin.parquet"
        output = RunOutput(out, manifest(len(jobs) + 1), mode="overwrite").open()
        for job in jobs:
            output.write_trial(lambda job=job: rollout_rows(job, results[job.key]))
        output.close(interrupted=True)
        journal = out.with_name(out.name + ".journal.jsonl")
        packed = journal.stat().st_size
        seconds, count = bench_scan(journal, args.repeats)
        print(
            f"the parquet output's journal (compressed lines): {packed / 1e6:.1f} MB, "
            f"{size / packed:.1f}x smaller than the .jsonl; scan_journal {seconds * 1e3:.0f} ms"
        )
        start = time.perf_counter()
        finish_output(out)
        print(
            f"finish_output to parquet: {len(jobs)} trials in "
            f"{(time.perf_counter() - start) * 1e3:.0f} ms"
        )
        plain = bench_run(folder, streaming=False, repeats=args.repeats)
        streamed = bench_run(folder, streaming=True, repeats=args.repeats)
        print(
            f"GuessTheNumber 64x4, concurrency 8: {plain:.0f} trials/s without output, "
            f"{streamed:.0f} trials/s streaming to .jsonl "
            f"({(1 - streamed / plain) * 100:.0f}% slower)"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    main()
