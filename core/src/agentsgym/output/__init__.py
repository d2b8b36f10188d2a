"""Durable output for long runs: streaming writes, exactly-once resume, one writer.

``agentsgym rollout`` and ``agentsgym eval`` write through :class:`RunOutput`:

* every finished trial is appended to a journal at once (:mod:`.journal`), so a
  killed run loses only the trials in flight; a ``.jsonl`` output is its own
  journal, a ``.parquet`` output is written from the journal when the run ends;
* the run's arguments are recorded beside the output (:mod:`.manifest`), and
  ``--resume`` continues it only with the same ones, playing each missing
  (task, rollout) once: a trial is in the output completely or not at all;
* an existing output is never overwritten without ``--overwrite``, and a second
  process is refused while one writes it (:mod:`.lock`);
* :func:`finish_output` writes the output of an interrupted run from its journal.

:mod:`.paths` names the files a run keeps beside its output.
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
from agentsgym.output.redaction import is_secret, redact_options
from agentsgym.output.run import Mode, RunOutput, choose_mode

__all__ = [
    "check_output_path",
    "is_secret",
    "load_records",
    "redact_options",
    "write_atomically",
    "write_records",
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
    "RunArguments",
    "RunManifest",
    "RunOutput",
    "choose_mode",
    "error_shape",
    "expected_rows",
    "failure_report",
    "finish_output",
    "read_manifest",
    "rollout_rows",
    "scan_journal",
    "trial_key",
]
