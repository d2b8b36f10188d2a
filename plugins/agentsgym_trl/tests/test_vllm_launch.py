"""The vLLM server a run starts: ready with progress, stopped at the end, on Ctrl-C and
when the trainer dies; a server that fails to start says why. Against a fake server
(fake_vllm_server.py) run as vLLM's module would be."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentsgym_trl.server_process import ServerStartError
from agentsgym_trl.vllm_server import LOG_FILE, resolve_python
from fake_vllm_server import TESTS, fake_server
from interruptible import python_taking_ctrl_c

GONE_WITHIN = 60.0
"""A hang guard: how long the processes have to go (they go within a second or two)."""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie has exited: only its parent has not read its status yet
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def wait_gone(pids: list[int]) -> list[int]:
    deadline = time.monotonic() + GONE_WITHIN
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


def server_pids(tmp_path: Path) -> list[int]:
    deadline = time.monotonic() + GONE_WITHIN
    while time.monotonic() < deadline:
        text = (tmp_path / "pids").read_text() if (tmp_path / "pids").exists() else ""
        if text.endswith("\n"):
            return [int(p) for p in text.split()]
        time.sleep(0.05)
    raise AssertionError("the fake server never wrote its pids")


def test_the_server_runs_with_vllms_settings_until_stopped_with_all_it_started(
    tmp_path: Path,
) -> None:
    server = fake_server(tmp_path, "--startup-seconds", "1.5")
    seen: list[tuple[float, str]] = []
    with server:
        waited = server.wait_ready(60, lambda s, line: seen.append((s, line)), poll_seconds=0.2)
        pids = server_pids(tmp_path)
        assert all(alive(p) for p in pids)
        command = server.command
        assert command[1:3] == ["-m", "fake_vllm_server"]
        assert {"--enable-scale-out", "--enforce-eager"} <= set(command)
        assert command[command.index("--logprobs-mode") + 1] == "processed_logprobs"
        assert server.env["VLLM_SERVER_DEV_MODE"] == "1"
    assert waited >= 1.5 and seen  # progress was reported while it started
    assert any("fake vLLM: loading some/model" in line for _, line in seen)
    assert wait_gone([server.process.pid, *pids]) == []
    assert "fake vLLM: loading" in (tmp_path / LOG_FILE).read_text()


def test_a_server_that_exits_during_start_up_says_why(tmp_path: Path) -> None:
    server = fake_server(tmp_path, "--exit-code", "3")
    with server, pytest.raises(ServerStartError, match="exited during start-up") as failed:
        server.wait_ready(60, poll_seconds=0.1)
    assert "cannot load some/model" in str(failed.value)
    assert str(tmp_path / LOG_FILE) in str(failed.value)


def test_a_server_not_ready_in_time_is_stopped(tmp_path: Path) -> None:
    server = fake_server(tmp_path, "--startup-seconds", "600", grace=2.0)
    with server, pytest.raises(ServerStartError, match="not ready after 1s"):
        server.wait_ready(1, poll_seconds=0.2)
    assert wait_gone([server.process.pid, *server_pids(tmp_path)]) == []


TRAINER = """
import sys, time
sys.path.insert(0, {tests!r})
from fake_vllm_server import fake_server
from pathlib import Path
server = fake_server(Path({folder!r}))
with server:
    server.wait_ready(60, poll_seconds=0.2)
    print(server.process.pid, flush=True)
    time.sleep(600)
"""


def start_trainer(tmp_path: Path) -> tuple[subprocess.Popen[str], list[int]]:
    code = TRAINER.format(tests=str(TESTS), folder=str(tmp_path))
    trainer = subprocess.Popen(
        [*python_taking_ctrl_c(), "-c", code], stdout=subprocess.PIPE, text=True
    )
    assert trainer.stdout is not None
    supervisor = int(trainer.stdout.readline())
    return trainer, [supervisor, *server_pids(tmp_path)]


def test_a_trainer_killed_outright_takes_its_server_down(tmp_path: Path) -> None:
    trainer, pids = start_trainer(tmp_path)
    trainer.kill()
    trainer.wait()
    assert wait_gone(pids) == []


def test_ctrl_c_in_the_trainer_stops_its_server(tmp_path: Path) -> None:
    trainer, pids = start_trainer(tmp_path)
    trainer.send_signal(signal.SIGINT)
    trainer.wait(timeout=GONE_WITHIN)
    assert wait_gone(pids) == []


def test_a_python_that_is_not_there_is_named(tmp_path: Path) -> None:
    with pytest.raises(ServerStartError, match="build_vllm_venv"):
        resolve_python(tmp_path / "no-venv")
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    os.symlink(sys.executable, tmp_path / "venv" / "bin" / "python")
    assert resolve_python(tmp_path / "venv") == tmp_path / "venv" / "bin" / "python"
