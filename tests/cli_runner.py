"""Run ``agentsgym ...`` in this process, exactly as the console script does.

``agentsgym.cli.main`` is called with ``sys.argv`` set, so its error handling (a
typed error -> one line on stderr, exit 2) is part of what is tested, at a fraction
of a subprocess's start-up cost. An exception that escapes main() (a traceback for
a user) propagates and fails the test.
"""

from __future__ import annotations

import contextlib
import io
import sys
from dataclasses import dataclass


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_cli(*args: str) -> CliResult:
    from agentsgym.cli import console, err_console, main

    stdout, stderr = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["agentsgym", *args]
    console.width = err_console.width = 250  # no wrapping inside the phrases tests look for
    code: int | str | None = 0
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                main()
            except SystemExit as exc:
                code = exc.code
    finally:
        sys.argv = argv
        console._width = err_console._width = None  # back to the terminal's width
    return CliResult(
        int(code or 0) if not isinstance(code, str) else 1, stdout.getvalue(), stderr.getvalue()
    )
