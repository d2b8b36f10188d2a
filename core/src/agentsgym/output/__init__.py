"""Durable output for long runs: streaming writes, exactly-once resume, one writer.

``agentsgym rollout`` and ``eval`` write through :class:`RunOutput`: each finished trial
is journaled at once (a killed run loses only the trials in flight), ``--resume`` plays
each missing trial once, and nothing is overwritten without ``--overwrite``.
"""

from __future__ import annotations

from agentsgym.atomic_files import write_atomically
from agentsgym.output.failures import ErrorGroup, FailureReport, error_shape, failure_report
from agentsgym.output.files import check_output_path, load_records, write_records
from agentsgym.output.finish import FinishResult, finish_output
from agentsgym.output.journal import (
    DEFAULT_FSYNC_INTERVAL,
    JournalScan,
    JournalWriter,
    scan_journal,
)
from agentsgym.output.lock import LockHolder, OutputLock
from agentsgym.output.manifest import (
    OPERATIONAL_AGENT_OPTIONS,
    RUN_LIMIT_ENV_KEYS,
    RunArguments,
    RunManifest,
    read_manifest,
)
from agentsgym.output.paths import OutputPaths
from agentsgym.output.records import expected_rows, rollout_rows, trial_key
from agentsgym.output.run import Mode, RunOutput, choose_mode
from agentsgym.redaction import (
    RedactingFilter,
    is_secret,
    redact,
    redact_argv,
    redact_text,
)

__all__ = [
    "DEFAULT_FSYNC_INTERVAL",
    "OPERATIONAL_AGENT_OPTIONS",
    "RUN_LIMIT_ENV_KEYS",
    "ErrorGroup",
    "FailureReport",
    "FinishResult",
    "JournalScan",
    "JournalWriter",
    "LockHolder",
    "Mode",
    "OutputLock",
    "OutputPaths",
    "RedactingFilter",
    "RunArguments",
    "RunManifest",
    "RunOutput",
    "check_output_path",
    "choose_mode",
    "error_shape",
    "expected_rows",
    "failure_report",
    "finish_output",
    "is_secret",
    "load_records",
    "read_manifest",
    "redact",
    "redact_argv",
    "redact_text",
    "rollout_rows",
    "scan_journal",
    "trial_key",
    "write_atomically",
    "write_records",
]
