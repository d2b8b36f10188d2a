"""run_cli: the ``agentsgym`` command line run in this process, as the console script.

``agentsgym.cli.main`` runs with ``sys.argv`` set, so its error handling (a typed error
becomes one line on stderr and exit code 2) is tested too, without a subprocess's
start-up cost. An exception that escapes ``main`` propagates and fails the test.
"""

from __future__ import annotations

import contextlib
import io
import sys
from dataclasses import dataclass

__all__ = ["CliResult", "run_cli"]


@dataclass
class CliResult:
    """What one ``agentsgym`` command did."""

    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_cli(*args: str, width: int = 250) -> CliResult:
    """Run ``agentsgym *args`` in this process; ``width`` (the consoles' width) is wide
    enough by default that no phrase a test looks for is wrapped."""
    from agentsgym.cli import console, err_console, main

    stdout, stderr = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["agentsgym", *args]
    console.width = err_console.width = width
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
    exit_code = 1 if isinstance(code, str) else int(code or 0)
    return CliResult(exit_code, stdout.getvalue(), stderr.getvalue())
