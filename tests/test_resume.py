"""--resume, --overwrite and the output lock, through the command line (in process).

The state a killed run leaves (a journal cut inside a trial, a run record saying
"running") is built here from a real run's output; test_resume_kill.py produces it
with a real ``kill -9``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import datasets
import pytest

from agentsgym.output import OutputLock, OutputPaths, read_manifest, scan_journal
from agentsgym.output.manifest import write_manifest
from agentsgym.testing import run_cli

GUESS = "agentsgym/GuessTheNumber-v0"


def load_rows(out: Path) -> list[dict[str, Any]]:
    """Rows of an output as datasets loads them, without the random session ids."""
    loaded = (
        datasets.Dataset.from_parquet(str(out))
        if out.suffix == ".parquet"
        else datasets.Dataset.from_json(str(out))
    ).to_list()
    for row in loaded:
        row.pop("session_id", None)
    return sorted(
        loaded, key=lambda r: (r["task_index"], r["rollout_index"], r.get("segment_index") or 0)
    )


def keys(rows: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return [(r["task_index"], r["rollout_index"]) for r in rows]


def killed_copy(reference: Path, out: Path, keep: int) -> None:
    """The files a run writing ``out`` leaves when killed after ``keep`` trials, with
    the next trial's write torn in half."""
    scan = scan_journal(reference)
    trials = list(scan.trials.values())
    lines = [json.dumps(row) for rows in trials[:keep] for row in rows]
    torn = json.dumps(trials[keep][0])[:40]
    paths = OutputPaths(out)
    paths.journal.write_text("".join(line + "\n" for line in lines) + torn)
    manifest = read_manifest(OutputPaths(reference).manifest)
    manifest.status, manifest.done_trials = "running", 0
    write_manifest(manifest, paths.manifest)


def ok(*args: str) -> str:
    result = run_cli(*args)
    assert result.code == 0, result.output
    return result.stdout


def test_an_existing_output_needs_resume_or_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    args = ("rollout", GUESS, "--num-tasks", "2", "--num-rollouts", "1", "--out", str(out))
    ok(*args)
    before = out.read_bytes()
    refused = run_cli(*args)
    assert refused.code == 2 and "already exists" in refused.stderr
    assert "--resume" in refused.stderr and "--overwrite" in refused.stderr
    assert "Traceback" not in refused.output and out.read_bytes() == before
    both = run_cli(*args, "--resume", "--overwrite")
    assert both.code == 2 and "contradict" in both.stderr
    ok(*args[:-2], "--num-rollouts", "2", "--out", str(out), "--overwrite")
    assert len(load_rows(out)) == 4
    assert read_manifest(OutputPaths(out).manifest).arguments.num_rollouts == 2


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_resume_plays_each_missing_trial_exactly_once(tmp_path: Path, suffix: str) -> None:
    common = ("rollout", GUESS, "--num-tasks", "4", "--num-rollouts", "2")
    reference = tmp_path / "reference.jsonl"
    ok(*common, "--out", str(reference))
    out = tmp_path / f"run{suffix}"
    killed_copy(reference, out, keep=3)
    stdout = ok(*common, "--out", str(out), "--resume")
    assert "3 of 8 trials already written, 5 to play" in stdout
    assert "8 trials in" in stdout and "5 played now" in stdout
    rows = load_rows(out)
    assert keys(rows) == [(t, r) for t in range(4) for r in range(2)]
    # compared in the same format: datasets reads JSON floats with less precision
    same_format = tmp_path / f"reference{suffix}"
    if suffix != ".jsonl":
        ok(*common, "--out", str(same_format))
    assert rows == load_rows(same_format)
    paths = OutputPaths(out)
    assert not (suffix == ".parquet" and paths.journal.exists())
    record = read_manifest(paths.manifest)
    assert (record.status, record.done_trials, record.resumed) == ("complete", 8, 1)
    # resuming a finished run plays nothing and changes nothing
    again = ok(*common, "--out", str(out), "--resume")
    assert "8 of 8 trials already written, 0 to play" in again
    assert load_rows(out) == rows


def test_eval_resume_summarizes_old_and_new_samples(tmp_path: Path) -> None:
    common = (
        "eval",
        GUESS,
        "--num-tasks",
        "5",
        "-k",
        "2",
        "--env-config",
        "max_steps_per_episode=2",
        "--env-config",
        "high=6",
    )
    reference = tmp_path / "reference.jsonl"
    ok(*common, "--out", str(reference))
    out = tmp_path / "run.jsonl"
    killed_copy(reference, out, keep=4)
    ok(*common, "--out", str(out), "--resume")
    assert load_rows(out) == load_rows(reference)
    summary = json.loads((tmp_path / "run.summary.json").read_text())
    assert summary == json.loads((tmp_path / "reference.summary.json").read_text())
    assert summary["num_samples"] == 10 and 0 < summary["accuracy"] < 1


def test_resume_refuses_changed_arguments_and_names_them(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    ok("rollout", GUESS, "--num-tasks", "2", "--out", str(out))
    refused = run_cli(
        "rollout",
        GUESS,
        "--num-tasks",
        "2",
        "--num-rollouts",
        "3",
        "--agent",
        "scripted",
        "--env-config",
        "high=10",
        "--out",
        str(out),
        "--resume",
    )
    assert refused.code == 2, refused.output
    for line in (
        "num_rollouts: 2 then, 3 now",
        "agent: 'agentsgym/bisect' then, 'scripted' now",
        "env_config: {} then, {'high': 10} now",
        "--overwrite",
    ):
        assert line in refused.stderr
    # a time budget is not part of a run's identity: raising it on resume is allowed
    ok("rollout", GUESS, "--num-tasks", "2", "--hook-timeout", "100", "--out", str(out), "--resume")


def test_resume_of_a_rows_file_notices_changed_rows(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    row = {"env_class_path": GUESS, "env_config": {"high": 8}, "task_data": {"target": 3}}
    rows.write_text(json.dumps(row) + "\n")
    out = tmp_path / "r.parquet"
    args = ("rollout", "--dataset", str(rows), "--agent", "agentsgym/bisect", "--out", str(out))
    ok(*args)
    rows.write_text(json.dumps({**row, "task_data": {"target": 5}}) + "\n")
    refused = run_cli(*args, "--resume")
    assert refused.code == 2 and "dataset (file content)" in refused.stderr


def test_resume_needs_a_run_record(tmp_path: Path) -> None:
    out = tmp_path / "foreign.jsonl"
    out.write_text('{"a": 1}\n')
    refused = run_cli("rollout", GUESS, "--out", str(out), "--resume")
    assert refused.code == 2 and "no run record" in refused.stderr
    # with nothing there at all, --resume simply starts the run
    fresh = tmp_path / "fresh.jsonl"
    ok("rollout", GUESS, "--num-tasks", "1", "--num-rollouts", "1", "--out", str(fresh), "--resume")
    assert len(load_rows(fresh)) == 1


def test_a_second_writer_of_the_same_output_is_refused(tmp_path: Path) -> None:
    import os

    out = tmp_path / "r.jsonl"
    with OutputLock(OutputPaths(out).lock, output=out):
        refused = run_cli("rollout", GUESS, "--num-tasks", "1", "--out", str(out))
    assert refused.code == 2 and "is being written by process" in refused.stderr
    assert str(os.getpid()) in refused.stderr and not out.exists()
    ok("rollout", GUESS, "--num-tasks", "1", "--out", str(out))
    assert not OutputPaths(out).lock.exists()


def test_finish_output_then_resume(tmp_path: Path) -> None:
    common = ("rollout", GUESS, "--num-tasks", "3", "--num-rollouts", "2", "--tokenizer", "none")
    reference = tmp_path / "reference.jsonl"
    ok(*common, "--out", str(reference))
    out = tmp_path / "run.parquet"
    killed_copy(reference, out, keep=2)
    stdout = ok("finish-output", str(out))
    assert "2 of 6 trials" in stdout and "--resume" in stdout
    assert len(load_rows(out)) == 2 and OutputPaths(out).journal.exists()
    ok(*common, "--out", str(out), "--resume")
    assert load_rows(out) == load_rows(reference)


@pytest.mark.parametrize(
    ("command", "suffix"), [("rollout", ".jsonl"), ("rollout", ".parquet"), ("eval", ".jsonl")]
)
def test_retry_failed_replays_the_failed_trials_exactly_once(
    tmp_path: Path, command: str, suffix: str
) -> None:
    """Trials that failed in an outage stay failed on --resume; --retry-failed plays
    them again, and the output holds every trial once, with its new result."""
    from envs_for_tests import ConfiguredCountdownEnv

    from agentsgym.testing import register_env

    outage, out = tmp_path / "outage", tmp_path / f"run{suffix}"
    outage.touch()
    options = json.dumps({"outage_file": str(outage), "outage_starts": [3]})
    args = [
        command,
        "test/Outage-v0",
        "--agent",
        "agentsgym/bisect",
        "--num-tasks",
        "3",
        "--num-rollouts",
        "2",
        "--out",
        str(out),
        "--env-config",
        f"service_options={options}",
        "--max-failure-rate",
        "0.5",
        "--split",
        "train",
    ]

    def rows() -> list[dict]:
        return datasets.Dataset.from_json(str(out)).to_list() if suffix == ".jsonl" else (
            datasets.Dataset.from_parquet(str(out)).to_list()
        )

    with register_env("test/Outage-v0", ConfiguredCountdownEnv):
        first = run_cli(*args)
        assert first.code == 0 and "2 of 6 trials failed" in first.stdout, first.output
        outage.unlink()
        assert run_cli(*args, "--resume").code == 0
        assert sum(r["error"] is not None for r in rows()) == 2  # --resume: failed is done
        refused = run_cli(*args, "--retry-failed")
        assert refused.code == 2 and "give --resume too" in refused.stderr
        retried = run_cli(*args, "--resume", "--retry-failed")
        assert retried.code == 0, retried.output
    final = rows()
    keys = [(r["task_index"], r["rollout_index"]) for r in final]
    assert sorted(keys) == [(t, r) for t in range(3) for r in range(2)]
    assert all(r["error"] is None for r in final)
    record = json.loads(Path(f"{out}.run.json").read_text())
    assert (record["status"], record["done_trials"], record["failed_trials"]) == ("complete", 6, 0)
