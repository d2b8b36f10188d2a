"""What an experiment tracker wrote offline, read back for tests of ``--report-to``.

* trackio keeps a project in one SQLite database, ``TRACKIO_DIR/<project>.db``: table
  ``metrics`` (a JSON object per logged entry, with its step and run) and ``configs``.
* A W&B offline run is a folder ``WANDB_DIR/wandb/offline-run-*`` whose
  ``run-<id>.wandb`` file is a LevelDB-style log (blocks of 32 KiB, each record a
  7-byte header: checksum, length, type) of protobuf ``Record`` messages, the file
  ``wandb sync`` uploads; a logged table is a JSON file under ``files/``.

:func:`tracker_environment` points both libraries at a test's folder and turns W&B
offline, so that nothing reaches the network or the working directory.
"""

from __future__ import annotations

import json
import os
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

WANDB_BLOCK = 32768
WANDB_HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def tracker_environment(folder: Path) -> dict[str, str]:
    """Environment variables that keep trackio and W&B under ``folder``, W&B offline."""
    return {
        "TRACKIO_DIR": str(folder / "trackio"),
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(folder / "wandb-dir"),
        "WANDB_CONFIG_DIR": str(folder / "wandb-config"),
        "WANDB_CACHE_DIR": str(folder / "wandb-cache"),
        "WANDB_DATA_DIR": str(folder / "wandb-data"),
    }


def run_agentsgym(*args: str, folder: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    """``agentsgym *args`` in a process of its own, as a user runs it, in ``folder`` with
    :func:`tracker_environment` (trackio reads ``TRACKIO_DIR`` once, on import: a run in
    this process could not point it at another folder). One torch thread: a second
    only contends with the runner's on a shared machine. ``timeout`` guards a hang."""
    env = {
        **os.environ,
        **tracker_environment(folder),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": "1",
        "COLUMNS": "200",
    }
    return subprocess.run(
        [sys.executable, "-m", "agentsgym", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# ------------------------------------------------------------------ trackio
def trackio_entries(folder: Path, project: str) -> list[dict[str, Any]]:
    """Every entry logged to ``project``: its metrics, with ``_run`` and ``_step``."""
    with sqlite3.connect(folder / "trackio" / f"{project}.db") as db:
        rows = db.execute("SELECT run_name, step, metrics FROM metrics ORDER BY id").fetchall()
    return [{**json.loads(metrics), "_run": run, "_step": step} for run, step, metrics in rows]


def trackio_config(folder: Path, project: str) -> dict[str, Any]:
    """The configuration of the (one) run of ``project``."""
    with sqlite3.connect(folder / "trackio" / f"{project}.db") as db:
        rows = db.execute("SELECT config FROM configs").fetchall()
    assert len(rows) == 1, f"expected one run's configuration, found {len(rows)}"
    return json.loads(rows[0][0])


def trackio_table(value: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of a logged ``trackio.Table``."""
    assert value["_type"] == "trackio.table", value
    return list(value["_value"])


# ------------------------------------------------------------------ W&B offline
def wandb_run_folder(folder: Path) -> Path:
    """The one offline run under ``folder``'s ``WANDB_DIR``."""
    runs = sorted((folder / "wandb-dir" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1, f"expected one offline W&B run, found {runs}"
    return runs[0]


def wandb_records(run_folder: Path) -> list[Any]:
    """The protobuf records of an offline run's ``.wandb`` file."""
    from wandb.proto import wandb_internal_pb2

    (path,) = run_folder.glob("run-*.wandb")
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    records, pieces, at = [], [], WANDB_HEADER
    while at + WANDB_HEADER <= len(data):
        left = WANDB_BLOCK - at % WANDB_BLOCK
        if left < WANDB_HEADER:  # a block's tail too short for a header is padding
            at += left
            continue
        _checksum, length, kind = struct.unpack("<IHB", data[at : at + WANDB_HEADER])
        if kind == 0 and length == 0:  # the zeros after the last record of a block
            at += left
            continue
        pieces.append(data[at + WANDB_HEADER : at + WANDB_HEADER + length])
        at += WANDB_HEADER + length
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(b"".join(pieces))
            records.append(record)
            pieces = []
    return records


def _item_key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)


def wandb_history(run_folder: Path) -> list[dict[str, Any]]:
    """The run's history: one dict per ``log`` call, its values decoded from JSON."""
    return [
        {_item_key(item): json.loads(item.value_json) for item in record.history.item}
        for record in wandb_records(run_folder)
        if record.WhichOneof("record_type") == "history"
    ]


def wandb_run(run_folder: Path) -> tuple[str, str, dict[str, Any]]:
    """The run's project, display name and configuration (as first set)."""
    for record in wandb_records(run_folder):
        if record.WhichOneof("record_type") == "run":
            config = {}
            for item in record.run.config.update:
                value = json.loads(item.value_json)
                config[_item_key(item)] = value.get("value") if isinstance(value, dict) else value
            return record.run.project, record.run.display_name, config
    raise AssertionError(f"{run_folder} has no run record")


def wandb_table(run_folder: Path, entry: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The rows of the table logged under ``key`` in a history ``entry``."""
    assert entry[f"{key}/_type"] == "table-file", entry
    table = json.loads((run_folder / "files" / entry[f"{key}/path"]).read_text())
    return [dict(zip(table["columns"], row)) for row in table["data"]]
