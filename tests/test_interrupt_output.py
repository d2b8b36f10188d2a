"""Ctrl-C while trials still finish: the output closes cleanly, nothing is printed after.

An interrupt closes the output on the main thread while the event loop may still hand
it trials that were ending at that moment; those are dropped (``--resume`` plays
them), never an error raised in the loop (issue 28.11: a parquet rollout printed a
44-line ``Task exception was never retrieved`` traceback after the clean message).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from agentsgym.output import JournalWriter, RunArguments, RunManifest, RunOutput, scan_journal
from agentsgym.output.manifest import read_manifest
from interruptible import python_taking_ctrl_c

pytestmark = pytest.mark.timeout(120)


def rows_of(task: int) -> list[dict[str, Any]]:
    return [
        {
            "task_index": task,
            "rollout_index": 0,
            "episode_index": 0,
            "segment_index": 0,
            "num_segments": 1,
            "error": None,
            "final_reward": 1.0,
        }
    ]


def test_a_trial_finishing_while_the_output_closes_is_dropped_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    arguments = RunArguments(num_tasks=3, num_rollouts=1, agent="a", env_id="e")
    manifest = RunManifest.new("rollout", arguments, planned_trials=3)
    output = RunOutput(tmp_path / "r.parquet", manifest, mode="new").open()
    output.write_trial(lambda: rows_of(0))
    drain = JournalWriter.close

    def close_while_a_trial_arrives(self: JournalWriter) -> None:
        output.write_trial(lambda: rows_of(1))  # the loop's thread, as the interrupt closes
        drain(self)

    monkeypatch.setattr(JournalWriter, "close", close_while_a_trial_arrives)
    output.close(interrupted=True)
    output.write_trial(lambda: rows_of(2))  # and after: dropped too
    assert list(scan_journal(output.paths.journal).trials) == [(0, 0)]
    record = read_manifest(output.paths.manifest)
    assert (record.status, record.done_trials) == ("interrupted", 1)


SLOW_CLOSING_PLUGIN = '''
import os
import time

from agentsgym import hookimpl
from agentsgym.output import JournalWriter
from agentsgym_classical import BisectAgent

_drain = JournalWriter.close


def slow_close(self):
    """Closing takes a while (a slow disk), so trials finish meanwhile."""
    time.sleep(float(os.environ["SLOW_CLOSE_SECONDS"]))
    _drain(self)


JournalWriter.close = slow_close


class SlowBisect(BisectAgent):
    def get_action(self, messages, agent_state):
        time.sleep(0.02)
        return super().get_action(messages, agent_state)


@hookimpl
def register_agents(register):
    register("slow/bisect", "{module}:SlowBisect", description="bisection, slowly")
'''


def test_ctrl_c_on_a_parquet_rollout_prints_no_traceback(tmp_path: Path) -> None:
    from agentsgym_scaffold import install_plugin

    site = tmp_path / "site"
    install_plugin(site, "agentsgym-slowclose", "agentsgym_slowclose", SLOW_CLOSING_PLUGIN)
    out = tmp_path / "r.parquet"
    env = {**os.environ, "PYTHONPATH": str(site), "SLOW_CLOSE_SECONDS": "1.0"}
    process = subprocess.Popen(
        [
            *python_taking_ctrl_c(),
            "-m",
            "agentsgym",
            "rollout",
            "agentsgym/GuessTheNumber-v0",
            "--agent",
            "slow/bisect",
            "--num-tasks",
            "40",
            "--num-rollouts",
            "3",
            "--max-concurrency",
            "4",
            "--out",
            str(out),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    journal = Path(f"{out}.journal.jsonl")
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and process.poll() is None:
            if journal.exists() and len(scan_journal(journal).trials) >= 2:
                break
            time.sleep(0.02)
        assert process.poll() is None, process.communicate()
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    assert "interrupted" in stdout and "--resume" in stdout
    assert "Traceback" not in stderr and "never retrieved" not in stderr, stderr
    record = read_manifest(Path(f"{out}.run.json"))
    assert record.status == "interrupted"
    assert record.done_trials == len(scan_journal(journal).trials) >= 2
