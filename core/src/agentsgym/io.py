"""Reading and writing rollout files (parquet or JSON lines) that ``datasets`` loads."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentsgym.errors import AgentsGymError
from agentsgym.trajectory import records_to_dataset

if TYPE_CHECKING:
    import datasets

SUFFIXES = (".parquet", ".jsonl")


def check_output_path(path: str | Path) -> Path:
    """Fail before any episode is played if the output cannot be written."""
    out = Path(path)
    if out.suffix not in SUFFIXES:
        raise AgentsGymError(
            f"output file {str(out)!r} must end in .parquet or .jsonl (got {out.suffix!r})"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    return out


def write_records(records: list[dict[str, Any]], path: str | Path) -> Path:
    """Write rollout records to ``path``; the format follows its suffix."""
    out = check_output_path(path)
    dataset = records_to_dataset(records)
    if out.suffix == ".parquet":
        dataset.to_parquet(str(out))
    else:
        dataset.to_json(str(out), lines=True, force_ascii=False)
    return out


def load_records(path: str | Path) -> datasets.Dataset:
    """Load a rollout file written by :func:`write_records`."""
    import datasets

    out = Path(path)
    if out.suffix == ".parquet":
        return datasets.Dataset.from_parquet(str(out))
    return datasets.Dataset.from_json(str(out))
