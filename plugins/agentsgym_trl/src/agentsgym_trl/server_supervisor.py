"""Runs a server (an inference engine) for a trainer, and takes it down when the trainer goes.

Run as a script, by the server's own python (a vLLM venv need not have agentsgym
installed: this file uses the standard library only)::

    PYTHON server_supervisor.py GRACE_SECONDS -- COMMAND...

The trainer starts it as the leader of a new process group; it starts ``COMMAND``
(vLLM's API server) in that group, where vLLM's engine and worker processes join it
too. It stops the whole group, ``SIGTERM`` and after ``GRACE_SECONDS`` ``SIGKILL``,
when:

* it is told to stop (``SIGTERM``, ``SIGINT``, ``SIGHUP``): the trainer's orderly end,
  Ctrl-C included;
* its parent is gone (the trainer was killed, even with ``SIGKILL``): its parent
  process id changes, which it checks twice a second.

When the server exits by itself, the rest of the group is stopped the same way and the
supervisor exits with the server's code. So no process of the server outlives the
trainer.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

CHECK_SECONDS = 0.5
"""How often the parent and the server are looked at."""


def stop_group(server: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM to the process group, then SIGKILL to what is left after ``grace``."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the group's signal reaches us too
    group = os.getpgid(0)
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while server.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    # Whatever is left (the server, or engine processes it left behind) is killed; so is
    # this process, which has nothing more to do.
    sys.stdout.flush()
    os.killpg(group, signal.SIGKILL)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: server_supervisor.py GRACE_SECONDS -- COMMAND...", file=sys.stderr)
        return 2
    grace = float(argv[0])
    parent = os.getppid()
    stopping: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        if not stopping:  # said at once: the signal may reach the server first
            print(f"[agentsgym] stopping the server: signal {signum}", flush=True)
        stopping.append(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, stop)
    server = subprocess.Popen(argv[2:])
    print(f"[agentsgym] supervising pid {server.pid} (process group {os.getpgid(0)})", flush=True)
    while server.poll() is None:
        if stopping or os.getppid() != parent:
            if not stopping:
                print("[agentsgym] stopping the server: the trainer is gone", flush=True)
            stop_group(server, grace)
            break
        time.sleep(CHECK_SECONDS)
    code = server.wait()
    print(f"[agentsgym] the server exited with code {code}", flush=True)
    stop_group(server, 0.0)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
