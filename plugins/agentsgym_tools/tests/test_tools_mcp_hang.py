"""An MCP server that hangs at start (it never answers ``initialize``) is stopped, never
orphaned: after ``close()``, after a start that timed out, and when the process that
started it exits without closing it. The server runs in a process group of its own, so
only its stop can end it; each test finds it by a marker in its command line and kills
its group when done, so a failure leaves nothing behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from agentsgym_tools import MCPTools, ToolDeclarationError

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/cmdline").exists(), reason="finds the server's process in /proc"
)

HANG_GUARD_SECONDS = 90.0
"""A safety net only: every wait below ends as soon as what it waits for holds."""


def hanging_server(marker: str) -> list[str]:
    """A server that starts and never answers (its last argument is ``marker``)."""
    return ["-c", "import time; time.sleep(3600)", marker]


def processes_with(marker: str) -> list[int]:
    """The live (not zombie) processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            arguments = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # it exited while we looked
        if marker.encode() in arguments and state != "Z":
            found.append(int(entry.name))
    return found


def wait_until(holds: object, what: str) -> None:
    deadline = time.monotonic() + HANG_GUARD_SECONDS
    while not holds():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"hang guard: {what}"
        time.sleep(0.05)


@pytest.fixture
def marker() -> Iterator[str]:
    """A unique marker for the test's server; its process group is killed afterwards."""
    marker = f"agentsgym-hanging-mcp-{uuid.uuid4().hex}"
    yield marker
    for pid in processes_with(marker):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def test_a_server_that_hangs_at_start_is_stopped_once_its_start_times_out(marker: str) -> None:
    tools = MCPTools(
        sys.executable, hanging_server(marker), start_timeout_seconds=1, linger_seconds=0
    )
    with pytest.raises(ToolDeclarationError, match="did not start within"):
        tools.tools()
    tools.close()
    wait_until(lambda: not processes_with(marker), "the hanging server is still alive")


def test_closing_while_a_server_hangs_at_start_stops_it(marker: str) -> None:
    tools = MCPTools(
        sys.executable,
        hanging_server(marker),
        start_timeout_seconds=HANG_GUARD_SECONDS,
        linger_seconds=0,
    )
    failures: list[BaseException] = []

    def list_tools() -> None:
        try:
            tools.tools()
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            failures.append(exc)

    starting = threading.Thread(target=list_tools)
    starting.start()
    wait_until(lambda: processes_with(marker), "the server never started")
    tools.close()
    starting.join(HANG_GUARD_SECONDS)
    assert not starting.is_alive()
    assert len(failures) == 1 and isinstance(failures[0], ToolDeclarationError)
    wait_until(lambda: not processes_with(marker), "the hanging server is still alive")


@pytest.mark.parametrize("shared", [True, False], ids=["shared server", "own server log"])
def test_a_process_that_exits_without_closing_leaves_no_server(
    marker: str, shared: bool, tmp_path: Path
) -> None:
    """The process starts the server, gives up after the start timeout and exits
    normally, never calling close()."""
    server_log = "None" if shared else "sys.stderr"
    script = (
        "import sys\n"
        "from agentsgym_tools import MCPTools\n"
        f"tools = MCPTools(sys.executable, {hanging_server(marker)!r}, "
        f"start_timeout_seconds=1, server_log={server_log})\n"
        "try:\n"
        "    tools.tools()\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__)\n"
    )
    # a file, not a pipe: a server left alive would hold a pipe open, and the run with it
    with (tmp_path / "stderr").open("w") as stderr:
        done = subprocess.run(
            [sys.executable, "-c", script],
            check=False,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            timeout=HANG_GUARD_SECONDS,
        )
    errors = (tmp_path / "stderr").read_text()
    assert done.returncode == 0 and done.stdout.strip() == "ToolDeclarationError", errors
    wait_until(lambda: not processes_with(marker), "the server outlived its process")
