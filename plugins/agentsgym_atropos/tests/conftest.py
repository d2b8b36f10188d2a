"""Fixtures of the agentsgym-atropos tests: atroposlib's real API server (run-api) on
loopback, and what an Atropos trainer does with it."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def unreachable_url() -> str:
    """A loopback URL nothing listens on (connections are refused at once)."""
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture
def api() -> Iterator[str]:
    """The URL of a fresh atroposlib ``run-api`` on loopback."""
    requests = pytest.importorskip("requests")
    run_api = shutil.which("run-api")
    if run_api is None:
        pytest.skip("atroposlib's run-api is not installed (pip install atroposlib)")
    port = free_port()
    process = subprocess.Popen(
        [run_api, "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            requests.get(url + "/", timeout=1)
            break
        except requests.ConnectionError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail("run-api did not start")
            time.sleep(0.1)
    yield url
    process.kill()
    process.wait()


@pytest.fixture
def register_trainer() -> Callable[[str, int], None]:
    """What an Atropos trainer does first: register, then pull once (which starts it)."""
    requests = pytest.importorskip("requests")

    def register(url: str, batch_size: int) -> None:
        answer = requests.post(
            url + "/register",
            json={
                "wandb_group": "g",
                "wandb_project": "p",
                "batch_size": batch_size,
                "max_token_len": 4096,
                "checkpoint_dir": "",
                "save_checkpoint_interval": -1,
                "starting_step": 0,
                "num_steps": 100,
            },
            timeout=10,
        ).json()
        assert "uuid" in answer
        assert requests.get(url + "/batch", timeout=10).json()["batch"] is None

    return register
