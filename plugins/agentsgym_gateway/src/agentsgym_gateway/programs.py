"""Agent programs: a command line (a process) or a Python callable, run for one task.

Every program gets its session's ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` (and
``OPENAI_MODEL``, the model to ask for), a working directory of its own, the task's
input (a command on stdin and in ``AGENTSGYM_TASK_INPUT``; a callable as
:attr:`ProgramRun.input`) and the rollout's seed (``AGENTSGYM_SEED``;
:attr:`ProgramRun.seed`). A program that exits non-zero, raises or outlives its
timeout gives an outcome that says so, with the tail of its stderr: it fails its
episode, never the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import signal
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STDERR_TAIL_CHARS = 2000
"""How much of a failed program's stderr its episode's error keeps."""


@dataclass(frozen=True)
class ProgramRun:
    """What one run of a program gets (a callable receives it as its argument)."""

    base_url: str
    api_key: str = field(repr=False)
    model: str
    workdir: Path
    input: str
    task_data: dict[str, Any]
    seed: int = 0
    """The rollout's seed (``EpisodeContext.seed``: the same for the episodes of one
    trial and across runs, different across a task's rollouts), for a program that
    samples or shuffles."""

    def environment(self) -> dict[str, str]:
        return {
            "OPENAI_BASE_URL": self.base_url,
            "OPENAI_API_KEY": self.api_key,
            "OPENAI_MODEL": self.model,
            "AGENTSGYM_TASK_INPUT": self.input,
            "AGENTSGYM_SEED": str(self.seed),
        }


@dataclass
class ProgramOutcome:
    """How a program ended: its exit status, output, and (a callable's) return value."""

    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    result: Any = None
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def failure(self, timeout: float) -> str | None:
        """The episode's error for this outcome (``None`` if the program succeeded)."""
        if self.ok:
            return None
        tail = self.stderr[-STDERR_TAIL_CHARS:].strip()
        what = (
            f"the program did not finish within {timeout:g} s (episode_timeout_seconds) and "
            "was stopped"
            if self.timed_out
            else f"the program exited with status {self.exit_code}"
        )
        return f"{what}; its stderr ends with: {tail}" if tail else what


@dataclass(frozen=True)
class CommandProgram:
    """A program run as a process: ``argv`` (or ``argv(task_data)``), in the working dir."""

    argv: Sequence[str] | Callable[[dict[str, Any]], Sequence[str]]
    environment: dict[str, str] = field(default_factory=dict)
    """Extra environment variables (say, a harness's switch that turns off telemetry)."""

    async def run(self, run: ProgramRun, timeout: float) -> ProgramOutcome:
        argv = list(self.argv(run.task_data) if callable(self.argv) else self.argv)
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=run.workdir,
            env={**os.environ, **self.environment, **run.environment()},
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group: a timeout stops its children too
        )
        try:
            out, err = await asyncio.wait_for(_exchange(process, run.input.encode()), timeout)
        except asyncio.TimeoutError:
            _kill_group(process.pid)
            out, err = await process.communicate()
            return ProgramOutcome(process.returncode, _text(out), _text(err), timed_out=True)
        return ProgramOutcome(process.returncode, _text(out), _text(err))


async def _exchange(process: asyncio.subprocess.Process, data: bytes) -> tuple[bytes, bytes]:
    """``process.communicate(data)``, except that a program which exits without reading
    all of its input is not an error: its exit status and stderr say what happened."""
    feeding = asyncio.ensure_future(_feed(process, data))
    assert process.stdout is not None and process.stderr is not None
    out, err = await asyncio.gather(process.stdout.read(), process.stderr.read())
    await feeding
    await process.wait()
    return out, err


async def _feed(process: asyncio.subprocess.Process, data: bytes) -> None:
    stdin = process.stdin
    assert stdin is not None
    # asyncio raises BrokenPipeError or ConnectionResetError for a program that is gone;
    # uvloop (the loop of a process where uvicorn set its policy) raises RuntimeError
    # "unable to perform operation on <WriteUnixTransport closed=True>".
    with contextlib.suppress(BrokenPipeError, ConnectionResetError, RuntimeError):
        if data:
            stdin.write(data)
            await stdin.drain()
        stdin.close()


@dataclass(frozen=True)
class CallableProgram:
    """A program written as a Python function of a :class:`ProgramRun` (sync or async);
    what it returns is the outcome's ``result``. A sync one runs in a thread, which a
    timeout cannot stop: it is abandoned (its session closed, so its calls fail)."""

    function: Callable[[ProgramRun], Any]

    async def run(self, run: ProgramRun, timeout: float) -> ProgramOutcome:
        if inspect.iscoroutinefunction(self.function):
            call = self.function(run)
        else:
            call = asyncio.get_running_loop().run_in_executor(None, self.function, run)
        try:
            result = await asyncio.wait_for(call, timeout)
        except asyncio.TimeoutError:
            return ProgramOutcome(None, timed_out=True)
        except Exception as exc:  # noqa: BLE001 - the program's failure fails its episode
            return ProgramOutcome(1, stderr="".join(traceback.format_exception(exc)))
        return ProgramOutcome(0, result=result, stdout=result if isinstance(result, str) else "")


Program = CommandProgram | CallableProgram


def as_program(program: Any) -> Program:
    """A :class:`CommandProgram` for a list of strings, a :class:`CallableProgram` for a
    function; a program as is."""
    if isinstance(program, (CommandProgram, CallableProgram)):
        return program
    if isinstance(program, (list, tuple)) and all(isinstance(a, str) for a in program):
        return CommandProgram(tuple(program))
    if callable(program):
        return CallableProgram(program)
    raise TypeError(
        f"a harness env's program must be a command line (a list of strings), a Python "
        f"callable taking a ProgramRun, or a CommandProgram/CallableProgram; got "
        f"{type(program).__name__}"
    )


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", "replace")
