"""The grading worker: ``python -m agentsgym_classical.grading.worker``.

Reads one JSON :class:`GradeRequest` per line on stdin and writes one JSON
:class:`Verdict` per line on stdout. It prints ``ready`` once math-verify is imported,
so the parent's grading deadline never includes the start-up. It exits when stdin
closes, so a worker never outlives the process that started it.

Grading runs in this process's main thread, so math-verify's signal-based timeouts
work here; the parent kills the worker if even those do not return in time.
"""

from __future__ import annotations

import logging
import sys
import time

READY = "ready"


def serve(stdin=sys.stdin, stdout=sys.stdout) -> None:  # type: ignore[no-untyped-def]
    """The request loop (separate from ``main`` so it can be tested in-process)."""
    # math-verify logs every timeout with the whole reply: a 1 MB line per pathological
    # answer. The verdict already says what happened.
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    logging.getLogger("latex2sympy2_extended").setLevel(logging.CRITICAL)
    from agentsgym_classical.grading.judge import judge
    from agentsgym_classical.grading.verdict import GradeRequest, Verdict

    stdout.write(READY + "\n")
    stdout.flush()
    for line in stdin:
        if not line.strip():
            continue
        start = time.perf_counter()
        try:
            verdict = judge(GradeRequest.model_validate_json(line))
        except Exception as exc:  # noqa: BLE001 - a bad request gets an error verdict
            verdict = Verdict(status="error", detail=f"bad request: {str(exc)[:200]}")
        verdict.seconds = time.perf_counter() - start
        stdout.write(verdict.model_dump_json() + "\n")
        stdout.flush()


def main() -> None:
    serve()


if __name__ == "__main__":
    main()
