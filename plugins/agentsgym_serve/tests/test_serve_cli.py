"""``agentsgym serve`` as a user runs it (a real process on a free port, stopped with
SIGTERM), its errors, and the rollout command against a server."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import agentsgym
from agentsgym.testing import run_cli
from agentsgym_classical import BisectAgent
from serve_helpers import GUESS, served

# a hang guard only: a server started on a loaded machine may take minutes
pytestmark = pytest.mark.timeout(600)


def first_line(process: subprocess.Popen[str]) -> str:
    """The next stdout line of a process: it comes, or the process ends. No clock: a
    loaded machine may take minutes to start a server (the test's timeout is the hang
    guard)."""
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        raise AssertionError(f"agentsgym serve printed nothing (exit code {process.wait()})")
    return line


def too_large(url: str, length: int) -> bytes:
    """The reply to a request that declares a body of ``length`` bytes and sends none."""
    host, port = url.removeprefix("http://").split(":")
    head = f"POST /reset HTTP/1.1\r\nhost: x\r\ncontent-length: {length}\r\n\r\n"
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head.encode("ascii"))
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return reply


def test_serve_runs_a_server_that_plays_and_stops_on_sigterm(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with open(log, "w") as errors:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentsgym",
                "serve",
                GUESS,
                "--port",
                "0",
                "--max-sessions",
                "8",
                "--env-config",
                "high=20",
                "--max-body-bytes",
                "4096",
            ],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
        try:
            line = first_line(process)
            url = line.split(" on ", 1)[1].split(" ", 1)[0]
            assert url.startswith("http://127.0.0.1:") and "OpenAPI" in line
            # printed once it accepts connections: a client's first try is answered
            with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), 60):
                pass
            env = agentsgym.make(url)
            assert env.config.high == 20 and env.env_id == GUESS
            batch = env.run_trial([{"seed": 1}, {"seed": 2}], BisectAgent(high=20))
            assert batch.final_rewards == [1.0, 1.0]
            env.close()
            assert too_large(url, 4097).startswith(b"HTTP/1.1 413")  # --max-body-bytes
        finally:
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=60)
            assert process.stdout is not None
            process.stdout.close()
    # uvicorn shuts down gracefully, then re-raises the signal: the exit status says
    # "terminated by SIGTERM", as for any server process.
    assert code in (0, -signal.SIGTERM)
    records = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert "Application shutdown complete." in [r["message"] for r in records]
    events = [r.get("event") for r in records]
    assert "serving" in events and events.count("session_created") == 2
    # the heap the server started with is frozen once, before it serves (bench/README.md)
    frozen = [r for r in records if r.get("event") == "heap_frozen"]
    assert len(frozen) == 1 and frozen[0]["objects"] > 1000
    assert events.index("heap_frozen") < events.index("serving")
    steps = [r for r in records if r.get("event") == "request" and r["path"].endswith("/step")]
    assert steps and all(r["status"] == 200 and r["method"] == "POST" for r in steps)


def test_serve_errors_are_one_line_and_exit_2() -> None:
    unknown = run_cli("serve", "agentsgym/GuessTheNumbr-v0", "--port", "0")
    assert unknown.code == 2 and "Did you mean: agentsgym/GuessTheNumber-v0" in unknown.stderr
    bad_config = run_cli("serve", GUESS, "--port", "0", "--env-config", "low=x")
    assert bad_config.code == 2 and "low" in bad_config.stderr
    class_path = run_cli("serve", "serve_envs:TermsEnv", "--port", "0")
    assert class_path.code == 2 and "--allow-class-paths" in class_path.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = run_cli("serve", GUESS, "--port", str(taken.getsockname()[1]))
    assert busy.code == 2 and "cannot listen on 127.0.0.1" in busy.stderr
    for result in (unknown, bad_config, class_path, busy):
        assert "Traceback" not in result.output


def test_rollout_plays_a_server_and_rows_naming_one_only_when_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTSGYM_ALLOW_REMOTE_ENVS", raising=False)
    with served(GUESS) as server:
        out = tmp_path / "direct.jsonl"
        direct = run_cli(
            "rollout",
            server.url,
            "--agent",
            "agentsgym/bisect",
            "--num-tasks",
            "2",
            "--num-rollouts",
            "1",
            "--out",
            str(out),
        )
        assert direct.code == 0, direct.output
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert [r["env_id"] for r in rows] == [GUESS, GUESS] and rows[0]["full_token_ids"]
        dataset = tmp_path / "rows.jsonl"
        dataset.write_text(
            "".join(
                json.dumps(
                    {"env_class_path": server.url, "env_config": {}, "task_data": {"seed": s}}
                )
                + "\n"
                for s in range(3)
            )
        )
        args = [
            "rollout",
            "--dataset",
            str(dataset),
            "--agent",
            "agentsgym/bisect",
            "--num-rollouts",
            "1",
            "--out",
            str(tmp_path / "rows_out.jsonl"),
        ]
        refused = run_cli(*args)
        assert refused.code == 2 and "--allow-remote-envs" in refused.stderr
        assert "Traceback" not in refused.output
        allowed = run_cli(*args, "--allow-remote-envs")
        assert allowed.code == 0, allowed.output
        assert "3 trajectories written" in allowed.stdout
        monkeypatch.setenv("AGENTSGYM_ALLOW_REMOTE_ENVS", server.url)
        by_environment = run_cli(*args, "--overwrite")
        assert by_environment.code == 0, by_environment.output
    assert os.environ["AGENTSGYM_ALLOW_REMOTE_ENVS"] == server.url


def test_rollout_of_a_server_without_agent_plays_with_the_served_default_agent(
    tmp_path: Path,
) -> None:
    """Issue 28: ``rollout http://host:port`` refused for want of an agent while the
    server reported its env's default agent (GuessTheNumber's: agentsgym/bisect)."""
    with served(GUESS) as server:
        env = agentsgym.make(server.url)
        assert env.default_agent == "agentsgym/bisect"
        env.close()
        out = tmp_path / "rows.jsonl"
        played = run_cli(
            "rollout", server.url, "--num-tasks", "2", "--num-rollouts", "1", "--out", str(out)
        )
    assert played.code == 0, played.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 and all(r["final_reward"] == 1.0 for r in rows)  # bisect wins
