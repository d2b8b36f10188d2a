"""``agentsgym train --async`` killed with SIGKILL, then ``--resume``: every step
1..N is trained exactly once, and what training played holds each step's groups once.

The rule (docs/long-runs.md): a checkpoint of step ``s`` keeps the rollout source where
step ``s``'s tasks were taken. Groups the killed run played for later steps (played
ahead, or admitted and trained but not checkpointed) are dropped from ``played.jsonl``
and those steps are re-played fresh, on the same tasks, by the resumed run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")

from agentsgym import make
from agentsgym.testing import run_cli
from agentsgym.trainers import RolloutSource
from agentsgym_trl.checkpoints import complete_checkpoints
from agentsgym_trl.played_rollouts import RecordingSource
from checkpointed_runs import CHECKPOINTED_RUN, GUESS

TINY_TOKENIZER = "agentsgym/tiny-chatml"
RUN = [
    "train",
    GUESS,
    *CHECKPOINTED_RUN,  # 4 tasks, 1 task x 2 rollouts a step, a checkpoint every step
    "--trainer",
    "per-token-grpo",
    "--model",
    "tiny",
    "--seed",
    "0",
    "--async",
    "--max-staleness",
    "1",
]
FIRST_CHECKPOINT_WAIT_SECONDS = 300.0
"""Only a hung run waits this long: the test goes on as soon as a checkpoint exists."""

pytestmark = [pytest.mark.timeout(600), pytest.mark.usefixtures("torch_single_thread")]


def read_jsonl(path: Path, *, torn_end: bool = False) -> list[dict[str, Any]]:
    """The rows of a JSON-lines file; ``torn_end``: without the torn last line that a
    write cut by SIGKILL may leave."""
    lines = path.read_text().splitlines()
    if torn_end and lines:
        try:
            json.loads(lines[-1])
        except ValueError:
            lines.pop()
    return [json.loads(line) for line in lines]


def kill_after_first_checkpoint(out: Path, log: Path) -> int:
    """Start a run far longer than the test, SIGKILL it once a complete checkpoint
    exists, and return its newest complete checkpoint's step."""
    environment = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "agentsgym", *RUN, "--max-steps", "1000"]
    with log.open("w") as output:
        process = subprocess.Popen(
            [*command, "--output-dir", str(out)],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=environment,
        )
        deadline = time.monotonic() + FIRST_CHECKPOINT_WAIT_SECONDS
        try:
            while not complete_checkpoints(out):
                assert process.poll() is None, f"the run ended on its own:\n{log.read_text()}"
                assert time.monotonic() < deadline, f"no checkpoint yet:\n{log.read_text()}"
                time.sleep(0.05)
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait()
    assert process.returncode == -signal.SIGKILL
    return complete_checkpoints(out)[-1][0]


def task_order(steps: int) -> list[int]:
    """The task seeds of steps 1..steps in an uninterrupted run of RUN."""
    env = make(GUESS, env_config={"high": 3, "max_steps_per_episode": 2})
    rows = [env.get_train_dataset()[i] for i in range(4)]
    source = RolloutSource(rows, tokenizer=TINY_TOKENIZER, tasks_per_step=1, seed=0)
    return [source.next_rows()[0].task_data["seed"] for _ in range(steps)]


def test_resume_after_kill_trains_every_step_once_and_records_each_group_once(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    checkpoint = kill_after_first_checkpoint(out, tmp_path / "killed.log")
    killed = read_jsonl(out / "played.jsonl", torn_end=True)
    assert not (out / "train_log.jsonl").exists()  # a killed run writes no step log
    last = checkpoint + 2

    resumed = run_cli(*RUN, "--max-steps", str(last), "--resume", "--output-dir", str(out))
    assert resumed.code == 0, resumed.output
    assert f"checkpoint-{checkpoint}" in resumed.output

    # every step trained exactly once, within the staleness bound
    logged = read_jsonl(out / "train_log.jsonl")
    assert [s["step"] for s in logged] == list(range(1, last + 1))
    assert all(s["num_rollouts"] == 2 and s["staleness_max"] <= 1 for s in logged)

    # what training played: each step's group once (1 task x 2 rollouts), none lost
    played = read_jsonl(out / "played.jsonl")
    groups_of_step: dict[int, set[int]] = defaultdict(set)
    rows_of_step: dict[int, int] = defaultdict(int)
    for row in played:
        groups_of_step[row["step"]].add(row["group_index"])
        rows_of_step[row["step"]] += 1
    assert sorted(groups_of_step) == list(range(1, last + 1))
    assert all(len(groups) == 1 for groups in groups_of_step.values())
    assert all(count == 2 for count in rows_of_step.values())
    assert len({row["group_index"] for row in played}) == last  # a group index each
    # the checkpointed steps' rows are the killed run's, kept as they were
    kept = [row for row in killed if row["step"] <= checkpoint]
    assert [row for row in played if row["step"] <= checkpoint] == kept
    # the steps after the checkpoint played again on the tasks an unbroken run plays
    seeds = {row["step"]: row["task_data"]["seed"] for row in played}
    assert [seeds[step] for step in range(1, last + 1)] == task_order(last)


def test_a_resumed_source_drops_the_rows_of_steps_after_its_checkpoint(tmp_path: Path) -> None:
    """What the killed run recorded beyond the checkpoint, torn line included, goes."""
    rows = [{"env_class_path": GUESS, "env_config": {}, "task_data": {"seed": s}} for s in range(3)]
    played = tmp_path / "played.jsonl"
    lines = [json.dumps({"step": s, "group_index": s - 1, "rollout_index": 0}) for s in (1, 2, 3)]
    played.write_text("\n".join(lines) + '\n{"step": 4, "group_in')
    first = RecordingSource(rows, record_to=tmp_path / "first.jsonl", tokenizer=TINY_TOKENIZER)
    first.next_rows()
    state = first.state_dict()  # as a checkpoint of step 1 keeps it
    assert state["steps_taken"] == 1

    source = RecordingSource(rows, record_to=played, append=True, tokenizer=TINY_TOKENIZER)
    source.load_state_dict(state)
    assert played.read_text() == lines[0] + "\n"
    assert source.next_rows().step == 2
    assert source.next_rows()[0].task_data == first.next_rows()[0].task_data
