"""Durability for real: ``kill -9`` a running ``agentsgym rollout``/``eval``, then resume.

The killed run is a subprocess playing GuessTheNumber with a bisection agent slowed
down by a sleep per action (``slow/bisect``, installed as a plugin for the test), so
it is killed with trials written and trials in flight. ``--resume`` (in this
process, without the sleep) must then give exactly the output an uninterrupted run
gives: every (task, rollout) once, every row equal (the agent is deterministic).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import datasets
import pytest

from agentsgym.output import OutputPaths, read_manifest, scan_journal
from agentsgym.testing import run_cli
from agentsgym_scaffold import install_plugin

pytestmark = pytest.mark.timeout(120)

SLOW_BISECT = '''
import os
import time

from agentsgym import hookimpl
from agentsgym_classical import BisectAgent


class SlowBisect(BisectAgent):
    """Bisection, sleeping SLOW_BISECT_DELAY seconds before every guess."""

    def get_action(self, messages, agent_state):
        time.sleep(float(os.environ.get("SLOW_BISECT_DELAY", "0")))
        return super().get_action(messages, agent_state)


@hookimpl
def register_agents(register):
    register("slow/bisect", "{module}:SlowBisect", description="bisection, slowly")
'''

DELAY = "0.04"  # per guess; 4-7 guesses a trial, so a run of 24 trials takes 2-3 s at least


@pytest.fixture
def slow_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The slow/bisect plugin, on sys.path here and in the subprocess's environment."""
    site = tmp_path / "site"
    install_plugin(site, "agentsgym-slow", "agentsgym_slow", SLOW_BISECT)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv("SLOW_BISECT_DELAY", raising=False)
    return {**os.environ, "PYTHONPATH": str(site), "SLOW_BISECT_DELAY": DELAY}


def kill_after(args: list[str], env: dict[str, str], journal: Path, trials: int) -> int:
    """Start ``agentsgym ARGS``, ``kill -9`` it once ``trials`` trials are in the journal.

    Returns how many complete trials the journal held at the kill.
    """
    process = subprocess.Popen(
        [sys.executable, "-m", "agentsgym", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and process.poll() is None:
            if journal.exists() and len(scan_journal(journal).trials) >= trials:
                break
            time.sleep(0.02)
        assert process.poll() is None, (
            f"the run ended before it was killed: {process.communicate()[1]}"
        )
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()
    assert process.returncode == -signal.SIGKILL
    return len(scan_journal(journal).trials)


def load(out: Path) -> list[dict[str, Any]]:
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


def ok(*args: str) -> str:
    result = run_cli(*args)
    assert result.code == 0, result.output
    return result.stdout


ROLLOUT = [
    "rollout",
    "agentsgym/GuessTheNumber-v0",
    "--agent",
    "slow/bisect",
    "--num-tasks",
    "8",
    "--num-rollouts",
    "3",
    "--max-concurrency",
    "2",
]


def test_kill_9_rollout_jsonl_then_resume(tmp_path: Path, slow_agent: dict[str, str]) -> None:
    out = tmp_path / "killed.jsonl"
    written = kill_after([*ROLLOUT, "--out", str(out)], slow_agent, out, trials=4)
    assert 4 <= written < 24
    assert read_manifest(OutputPaths(out).manifest).status == "running"  # it never knew
    stdout = ok(*ROLLOUT, "--out", str(out), "--resume")
    assert f"{written} of 24 trials already written, {24 - written} to play" in stdout
    reference = tmp_path / "reference.jsonl"
    ok(*ROLLOUT, "--out", str(reference))
    rows = load(out)
    assert [(r["task_index"], r["rollout_index"]) for r in rows] == [
        (t, r) for t in range(8) for r in range(3)
    ]
    assert rows == load(reference)


def test_kill_9_parquet_finish_output_then_resume(
    tmp_path: Path, slow_agent: dict[str, str]
) -> None:
    out = tmp_path / "killed.parquet"
    paths = OutputPaths(out)
    written = kill_after([*ROLLOUT, "--out", str(out)], slow_agent, paths.journal, trials=3)
    assert not out.exists()
    stdout = ok("finish-output", str(out))
    assert f"{written} of 24 trials" in stdout and "--resume" in stdout
    assert len(load(out)) == written  # a parquet that datasets loads, from the journal
    ok(*ROLLOUT, "--out", str(out), "--resume")
    assert not paths.journal.exists()
    reference = tmp_path / "reference.parquet"
    ok(*ROLLOUT, "--out", str(reference))
    assert load(out) == load(reference)


def test_kill_9_eval_then_resume_summarizes_every_sample(
    tmp_path: Path, slow_agent: dict[str, str]
) -> None:
    args = [
        "eval",
        "agentsgym/GuessTheNumber-v0",
        "--agent",
        "slow/bisect",
        "--num-tasks",
        "8",
        "-k",
        "3",
        "--max-concurrency",
        "2",
        "--env-config",
        "max_steps_per_episode=4",
    ]
    out = tmp_path / "killed.jsonl"
    written = kill_after([*args, "--out", str(out)], slow_agent, out, trials=4)
    assert written < 24
    # while the killed run's lock file is still there, a new run is not blocked by it
    assert OutputPaths(out).lock.exists()
    ok(*args, "--out", str(out), "--resume")
    reference = tmp_path / "reference.jsonl"
    ok(*args, "--out", str(reference))
    assert load(out) == load(reference)
    summary = json.loads((tmp_path / "killed.summary.json").read_text())
    assert summary == json.loads((tmp_path / "reference.summary.json").read_text())
    assert summary["num_samples"] == 24
