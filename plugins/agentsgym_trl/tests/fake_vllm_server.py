"""A stand-in for ``python -m vllm.entrypoints.openai.api_server`` in launcher tests.

Standard library only, as a server. It takes vLLM's command line (the options it reads, and any
other), writes its pid and a child's pid to ``--pid-file`` (the child: a process it
starts, as vLLM starts its engine), and answers ``GET /health`` with 200 once
``--startup-seconds`` have passed. ``--exit-code N`` makes it exit at once with N
(a start-up failure), after printing a line for the log.
"""

from __future__ import annotations

import argparse
import http.server
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TESTS = Path(__file__).parent


def fake_server(folder: Path, *extra: str, grace: float | None = None) -> Any:
    """A run's vLLM server (agentsgym_trl.vllm_server) that starts this fake instead,
    its log and pid file in ``folder``."""
    from agentsgym_trl.vllm_server import LOG_FILE, vllm_server

    server = vllm_server(
        sys.executable,
        "some/model",
        log_path=folder / LOG_FILE,
        serve_args=["--pid-file", str(folder / "pids"), *extra],
        env={"PYTHONPATH": str(TESTS)},
        module="fake_vllm_server",
    )
    if grace is not None:
        server.grace = grace
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid-file")
    parser.add_argument("--startup-seconds", type=float, default=0.0)
    parser.add_argument("--exit-code", type=int)
    args, _ = parser.parse_known_args()
    if args.exit_code is not None:
        print(f"fake vLLM: cannot load {args.model}", flush=True)
        sys.exit(args.exit_code)
    engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    if args.pid_file:
        with open(args.pid_file, "w") as handle:
            handle.write(f"{os.getpid()} {engine.pid}\n")
    ready_at = time.monotonic() + args.startup_seconds

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            ok = self.path == "/health" and time.monotonic() >= ready_at
            self.send_response(200 if ok else 503)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    print(f"fake vLLM: loading {args.model} on port {args.port}", flush=True)
    server = http.server.ThreadingHTTPServer((args.host, args.port), Handler)
    server.serve_forever()


if __name__ == "__main__":
    main()
