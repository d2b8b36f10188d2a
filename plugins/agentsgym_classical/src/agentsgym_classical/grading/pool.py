"""A pool of grading worker processes with a hard deadline per reply.

Why processes: the runner plays episodes in threads, and math-verify's timeouts use
``signal.alarm``, which only works in the main thread. Without them a reply such as
``9^9^9^9^9`` makes SymPy build a huge integer while holding the GIL, which stalls
every thread of the process, not only the one grading. A worker process grades in its
own main thread (so math-verify's timeouts work) and the parent kills it when a reply
takes longer than the deadline, then starts a fresh one on the next request.

Workers start lazily (about a second each, importing SymPy), are reused across
replies and envs, and exit with the parent (they stop when their stdin closes).
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

from agentsgym_classical.errors import GradingUnavailableError
from agentsgym_classical.grading.verdict import GradeRequest, Verdict
from agentsgym_classical.grading.worker import READY

logger = logging.getLogger(__name__)

POOL_SIZE_ENV = "AGENTSGYM_CLASSICAL_GRADERS"
STARTUP_TIMEOUT = 120.0
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class WorkerDied(Exception):
    """The worker exited while grading (killed from outside, out of memory)."""


class DeadlineExceeded(Exception):
    """The worker did not answer in time."""


class WorkerProcess:
    """One ``python -m agentsgym_classical.grading.worker`` child, used by one thread at a time."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_ROOT, env.get("PYTHONPATH")]))
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "agentsgym_classical.grading.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
            )
        except OSError as exc:
            raise GradingUnavailableError(f"could not start a grading worker: {exc}") from exc
        self._buffer = b""
        try:
            line = self._read_line(time.monotonic() + STARTUP_TIMEOUT)
        except (WorkerDied, DeadlineExceeded) as exc:
            self.kill()
            raise GradingUnavailableError(
                f"the grading worker did not start ({type(exc).__name__}); check that "
                f"'{sys.executable} -m agentsgym_classical.grading.worker' runs and that "
                "math-verify is installed"
            ) from exc
        if line != READY:
            self.kill()
            raise GradingUnavailableError(
                f"the grading worker said {line[:200]!r} instead of {READY!r}"
            )

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def call(self, request: GradeRequest, timeout: float) -> Verdict:
        """Send one request and wait at most ``timeout`` seconds for its verdict."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(request.model_dump_json().encode() + b"\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise WorkerDied(str(exc)) from exc
        return Verdict.model_validate_json(self._read_line(time.monotonic() + timeout))

    def _read_line(self, deadline: float) -> str:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DeadlineExceeded
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise WorkerDied(f"worker exited with code {self.process.poll()}")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def kill(self) -> None:
        if self.alive:
            self.process.kill()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - kill -9 does not fail
            logger.warning("grading worker %d did not exit after SIGKILL", self.process.pid)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()

    def close(self) -> None:
        """Ask the worker to exit (EOF on stdin), killing it if it lingers."""
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
            self.process.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class GraderPool:
    """Up to ``size`` workers shared by every thread; a thread borrows one per reply."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a grader pool needs at least one worker, got {size}")
        self.size = size
        self._idle: queue.LifoQueue[WorkerProcess] = queue.LifoQueue()
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(size)
        self._all: set[WorkerProcess] = set()
        self.restarts = 0

    def grade(self, request: GradeRequest, timeout: float) -> Verdict:
        """The worker's verdict, or ``timeout``/``error`` when it misses the deadline or dies."""
        with self._slots:
            worker = self._borrow()
            start = time.perf_counter()
            try:
                verdict = worker.call(request, timeout)
            except DeadlineExceeded:
                self._discard(worker)
                return Verdict(
                    status="timeout",
                    detail=f"grading took longer than {timeout:g}s",
                    seconds=time.perf_counter() - start,
                )
            except WorkerDied as exc:
                self._discard(worker)
                logger.warning("a grading worker died: %s", exc)
                return Verdict(status="error", detail=f"grading worker died: {exc}")
            self._idle.put(worker)
            return verdict

    def _borrow(self) -> WorkerProcess:
        try:
            worker = self._idle.get_nowait()
            if worker.alive:
                return worker
            self._discard(worker)
        except queue.Empty:
            pass
        worker = WorkerProcess()
        with self._lock:
            self._all.add(worker)
        return worker

    def _discard(self, worker: WorkerProcess) -> None:
        worker.kill()
        with self._lock:
            self._all.discard(worker)
            self.restarts += 1

    def close(self) -> None:
        """Stop every worker (called at exit)."""
        with self._lock:
            workers, self._all = list(self._all), set()
        for worker in workers:
            worker.close()


_pool: GraderPool | None = None
_pool_lock = threading.Lock()


def default_pool_size() -> int:
    """``AGENTSGYM_CLASSICAL_GRADERS`` if set, else up to 4 workers (one per core)."""
    raw = os.environ.get(POOL_SIZE_ENV, "").strip()
    if raw:
        try:
            return max(1, int(raw))
        except ValueError:
            logger.warning("ignoring %s=%r: not an integer", POOL_SIZE_ENV, raw)
    return max(1, min(4, os.cpu_count() or 1))


def get_pool() -> GraderPool:
    """The process-wide grader pool, created on first use and closed at exit."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = GraderPool(default_pool_size())
            atexit.register(_pool.close)
        return _pool
