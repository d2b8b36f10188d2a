"""Subprocesses that a test stops with SIGINT, as a user's Ctrl-C would."""

from __future__ import annotations

import sys

_RESET_AND_EXEC = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


def python_taking_ctrl_c() -> list[str]:
    """The start of a command line running Python (the same process, after an exec) with
    SIGINT at its default, so that it takes SIGINT as Ctrl-C even when the tests were
    started with SIGINT ignored (a shell's background job, ``... &``), which it would
    inherit and go on ignoring. (Not ``preexec_fn``: unsafe in a process with threads.)"""
    return [sys.executable, "-c", _RESET_AND_EXEC]
