"""agentsgym.output: the journal, torn writes, the lock, the run record, failures."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import datasets
import pytest

from agentsgym.errors import JournalError, OutputError, OutputLockedError
from agentsgym.output import (
    JournalWriter,
    OutputLock,
    OutputPaths,
    RunArguments,
    RunManifest,
    error_shape,
    expected_rows,
    failure_report,
    finish_output,
    scan_journal,
)
from agentsgym.output.journal import compress_rows, encode_rows, repair_tail
from agentsgym.output.manifest import read_manifest, write_manifest


def rollout_row(
    task: int, rollout: int, *, segment: int = 0, segments: int = 1, error: str | None = None
) -> dict[str, Any]:
    return {
        "task_index": task,
        "rollout_index": rollout,
        "episode_index": 0,
        "segment_index": segment,
        "num_segments": segments,
        "error": error,
        "final_reward": 1.0 if error is None else 0.0,
        "num_turns": 2,
        "task_data": {"seed": task},
        "messages": [{"role": "user", "content": f"task {task} é"}],
    }


def trial(task: int, rollout: int, segments: int = 1) -> list[dict[str, Any]]:
    return [
        rollout_row(task, rollout, segment=s, segments=segments) for s in range(max(segments, 1))
    ]


TRIALS = [
    trial(0, 0),
    trial(0, 1, segments=3),
    trial(1, 0),
    [rollout_row(1, 1, error="ValueError: boom")],
    trial(2, 0, segments=2),
]


def write_journal(path: Path, trials: list[list[dict[str, Any]]], compress: bool = False) -> None:
    writer = JournalWriter(path, fsync_interval=0.0, compress=compress)
    for rows in trials:
        writer.submit(lambda rows=rows: rows)
    writer.close()


# ---------------------------------------------------------------------- journal
def test_journal_round_trip_keeps_every_trial_in_order(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    write_journal(path, TRIALS)
    scan = scan_journal(path)
    assert list(scan.trials) == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)]
    assert scan.trials[(0, 1)] == TRIALS[1]
    assert scan.torn_bytes == 0 and scan.duplicates == 0
    # the journal of a .jsonl output is the output: datasets loads it as it is
    assert datasets.Dataset.from_json(str(path)).num_rows == sum(len(t) for t in TRIALS)


@pytest.mark.parametrize("compress", [False, True])
def test_a_torn_end_anywhere_loses_exactly_the_trial_being_written(
    tmp_path: Path, compress: bool
) -> None:
    """kill -9 may cut the last write anywhere: every cut point is recovered."""
    path = tmp_path / "full.jsonl"
    write_journal(path, TRIALS, compress=compress)
    data = path.read_bytes()
    ends, offset = [], 0
    for rows in TRIALS:
        offset += len((compress_rows if compress else encode_rows)(rows))
        ends.append(offset)
    # every byte around each line end (where a cut changes meaning), every 5th elsewhere
    line_ends = [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    cuts = sorted(
        {c for end in [0, *line_ends] for c in range(end - 3, end + 4) if 0 <= c <= len(data)}
        | set(range(0, len(data) + 1, 5))
    )
    cut_path = tmp_path / "cut.jsonl"
    for cut in cuts:
        cut_path.write_bytes(data[:cut])
        scan = scan_journal(cut_path)
        complete = sum(1 for end in ends if end <= cut)
        assert len(scan.trials) == complete, cut
        assert scan.valid_size == (ends[complete - 1] if complete else 0), cut
        repair_tail(scan)
        assert cut_path.stat().st_size == scan.valid_size
        assert len(scan_journal(cut_path).trials) == complete


def test_damage_in_the_middle_is_not_mistaken_for_a_torn_end(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    write_journal(path, TRIALS)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + b"{not json\n" + b"".join(lines[1:]))
    with pytest.raises(JournalError, match=r"out.jsonl:2 .*--overwrite"):
        scan_journal(path)
    # a multi-row trial missing a row, followed by other trials
    path.write_bytes(lines[0] + lines[1] + b"".join(lines[3:]))
    with pytest.raises(JournalError, match=r"task 0, rollout 1.* 2 of its 3 rows"):
        scan_journal(path)


def test_a_trial_written_twice_counts_once_with_its_later_rows(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    again = [dict(row, final_reward=0.5) for row in TRIALS[0]]
    write_journal(path, [*TRIALS, again])
    scan = scan_journal(path)
    assert len(scan.trials) == len(TRIALS) and scan.duplicates == 1
    assert scan.trials[(0, 0)] == again
    # the copy right after the first (a failed last trial played again by --retry-failed)
    for compress in (False, True):
        last = [dict(row, error=None) for row in TRIALS[-1]]
        path.unlink()
        write_journal(path, [*TRIALS, last], compress=compress)
        scan = scan_journal(path)
        assert scan.torn_bytes == 0 and scan.duplicates == 1
        assert len(scan.trials) == len(TRIALS) and scan.trials[(2, 0)] == last


def test_a_compressed_journal_holds_the_same_rows_in_a_fraction_of_the_bytes(
    tmp_path: Path,
) -> None:
    long = [
        dict(row, full_token_ids=list(range(4000)), agent_token_mask=[0, 1] * 2000)
        for rows in TRIALS
        for row in rows
    ]
    plain, packed = tmp_path / "plain.jsonl", tmp_path / "packed.jsonl"
    write_journal(plain, [long])
    write_journal(packed, [long], compress=True)
    assert scan_journal(packed).rows == scan_journal(plain).rows == long
    assert packed.stat().st_size * 2 < plain.stat().st_size


def test_rows_that_json_cannot_hold_are_repaired_not_fatal(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    row = rollout_row(0, 0)
    row["messages"] = [{"role": "user", "content": "lone \ud800 surrogate"}]
    row["step_infos"] = [{"score": float("nan"), "big": float("inf")}]
    row["full_token_ids"] = np.array([1, 2, 3])
    line = encode_rows([row])
    back = json.loads(line)
    assert back["messages"][0]["content"] == "lone \ufffd surrogate"
    assert back["step_infos"] == [{"score": None, "big": None}]
    assert back["full_token_ids"] == [1, 2, 3]


def test_a_failing_write_stops_the_run_with_an_output_error(tmp_path: Path) -> None:
    writer = JournalWriter(tmp_path / "out.jsonl")

    def broken() -> list[dict[str, Any]]:
        raise OSError(28, "No space left on device")

    writer.submit(broken)
    with pytest.raises(OutputError, match="No space left on device.*--resume"):
        writer.close()


def test_expected_rows_follow_segments_and_failures() -> None:
    assert expected_rows(rollout_row(0, 0, segments=3)) == 3
    assert expected_rows(rollout_row(0, 0, segments=0)) == 1  # played without a tokenizer
    assert expected_rows(rollout_row(0, 0, segments=3, error="boom")) == 1
    assert expected_rows({"task_index": 0, "rollout_index": 0, "correct": True}) == 1  # eval sample


# ---------------------------------------------------------------------- lock
HOLD_LOCK = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from agentsgym.output import OutputLock
    lock = OutputLock(Path(sys.argv[1]))
    lock.acquire()
    print("locked", flush=True)
    time.sleep(120)
    """
)


def test_a_second_writer_is_refused_with_the_holders_name_until_it_dies(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(OutputLockedError) as refused:
            OutputLock(path, output=tmp_path / "out.jsonl").acquire()
        message = str(refused.value)
        assert f"process {holder.pid} on " in message and "out.jsonl" in message
        assert "-c" in message and "started 20" in message
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    # kill -9 leaves the file behind, but not the lock: the next run takes it at once
    assert path.exists()
    with OutputLock(path) as lock:
        assert lock.held
        assert json.loads(path.read_text())["pid"] == os.getpid()
    assert not path.exists()


def test_the_lock_is_exclusive_within_one_process_too(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    with OutputLock(path), pytest.raises(OutputLockedError, match=f"process {os.getpid()}"):
        OutputLock(path).acquire()
    OutputLock(path).acquire()


# ---------------------------------------------------------------------- run record
def arguments(**changes: Any) -> RunArguments:
    base = RunArguments(
        env_id="agentsgym/GuessTheNumber-v0",
        split="train",
        num_tasks=4,
        num_rollouts=2,
        env_config={"high": 50},
        agent="openai",
        agent_options={"model": "m", "temperature": 0.7, "base_url": "http://a", "api_key": "sk-1"},
        tokenizer="agentsgym/tiny-chatml",
    )
    return base.model_copy(update=changes)


def test_resume_compares_what_decides_the_result_and_nothing_else() -> None:
    before = arguments()
    assert before.differences(arguments()) == []
    # operational settings, time budgets and secrets may change on resume
    assert (
        before.differences(
            arguments(
                env_config={
                    "high": 50,
                    "hook_timeout_seconds": 9.0,
                    "episode_timeout_seconds": 99.0,
                },
                agent_options={
                    "model": "m",
                    "temperature": 0.7,
                    "base_url": "http://b",
                    "api_key": "sk-2",
                    "timeout": 5,
                },
            )
        )
        == []
    )
    changed = before.differences(
        arguments(
            num_rollouts=4,
            env_config={"high": 60},
            agent_options={"model": "other", "temperature": 0.7},
            tokenizer="none",
        )
    )
    text = "\n".join(changed)
    assert len(changed) == 4
    for name in ("num_rollouts: 2 then, 4 now", "env_config", "agent_options", "tokenizer"):
        assert name in text
    assert "sk-" not in text


def test_the_run_record_never_holds_a_secret(tmp_path: Path) -> None:
    manifest = RunManifest.new(
        "rollout",
        arguments(),
        planned_trials=8,
        command_line=["agentsgym", "rollout", "--agent-option", "api_key=sk-secret"],
    )
    path = tmp_path / "x.jsonl.run.json"
    write_manifest(manifest, path)
    text = path.read_text()
    assert "sk-" not in text and "<redacted>" in text
    assert read_manifest(path).arguments.agent_options["model"] == "m"
    path.write_text("{broken")
    with pytest.raises(OutputError, match="not one agentsgym wrote.*--overwrite"):
        read_manifest(path)


# ---------------------------------------------------------------------- failures
def test_failures_are_grouped_by_the_shape_of_their_message() -> None:
    report = failure_report(
        [
            None,
            "ValueError: task_data target 150 is outside [1, 100]",
            "ValueError: task_data target 7 is outside [10, 20]",
            "APIConnectionError: Connection error.",
            None,
        ]
    )
    assert (report.total, report.failed) == (5, 3)
    assert report.common_errors[0].count == 2
    assert report.common_errors[0].example.endswith("outside [1, 100]")
    assert math.isclose(report.rate, 0.6)
    assert not report.fails_run() and report.fails_run(0.5) and not report.fails_run(0.6)
    assert failure_report(["x", "y"]).fails_run()  # every trial failed
    assert not failure_report([]).fails_run()
    assert error_shape("id 'ab' at 0xdeadbeef12 took 3.5 s") == "id '…' at … took N s"


# ---------------------------------------------------------------------- finishing
def test_finish_output_writes_parquet_and_keeps_the_journal_of_a_partial_run(
    tmp_path: Path,
) -> None:
    paths = OutputPaths(tmp_path / "r.parquet")
    write_manifest(RunManifest.new("rollout", arguments(), planned_trials=6), paths.manifest)
    write_journal(paths.journal, list(reversed(TRIALS)))
    with open(paths.journal, "ab") as handle:
        handle.write(b'{"task_index": 2, "rollout_')  # torn by kill -9
    result = finish_output(paths.out)
    assert (result.trials, result.planned, result.complete) == (5, 6, False)
    loaded = datasets.Dataset.from_parquet(str(paths.out))
    keys = list(zip(loaded["task_index"], loaded["rollout_index"], loaded["segment_index"]))
    assert keys == sorted(keys) and len(keys) == sum(len(t) for t in TRIALS)
    assert paths.journal.exists() and read_manifest(paths.manifest).status == "partial"
    # the last trial arrives (a resumed run): finishing again completes and cleans up
    write_journal(paths.journal, [trial(2, 1)])
    result = finish_output(paths.out)
    assert result.complete and not paths.journal.exists()
    assert read_manifest(paths.manifest).status == "complete"
    assert datasets.Dataset.from_parquet(str(paths.out)).num_rows == len(keys) + 1


def test_finish_output_of_something_that_is_no_run_says_so(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="no run writing"):
        finish_output(tmp_path / "nothing.parquet")
    (tmp_path / "foreign.jsonl").write_text("{}\n")
    with pytest.raises(OutputError, match="no run record"):
        finish_output(tmp_path / "foreign.jsonl")


def test_an_interrupt_while_finishing_leaves_an_honest_record_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM near the end of a run arrives while the final file is written: the record
    says interrupted with every journaled trial counted, and no .tmp file stays."""
    from agentsgym.output import RunOutput
    from agentsgym.trajectory import records_to_dataset

    out = tmp_path / "r.parquet"
    output = RunOutput(out, RunManifest.new("rollout", arguments(), planned_trials=5), mode="new")
    output.open()
    for rows in TRIALS:
        output.write_trial(lambda rows=rows: rows)

    def interrupted_write(self: Any, path: str) -> None:
        Path(path).write_bytes(b"PAR1 half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr(type(records_to_dataset(TRIALS[0])), "to_parquet", interrupted_write)
    with pytest.raises(KeyboardInterrupt):
        output.finish()
    output.close(interrupted=True)
    output.write_trial(lambda: trial(3, 0))  # a trial ending after the interrupt: dropped
    record = read_manifest(output.paths.manifest)
    assert (record.status, record.done_trials) == ("interrupted", len(TRIALS))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [out.name + ".journal.jsonl", out.name + ".run.json"]
    )


def test_a_full_disk_leaves_no_temporary_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "r.jsonl.run.json"

    def full(self: Path, data: bytes) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(OSError, match="No space"):
        write_manifest(RunManifest.new("rollout", arguments(), planned_trials=1), path)
    assert list(tmp_path.iterdir()) == []
