"""The dataset row schema, ``{"env_class_path": str, "env_config": dict, "task_data":
dict}``: the public contract between datasets, the runner and envs. The dict columns are
stored as JSON in Arrow, so rows of different envs (with different config keys) mix in
one ``datasets.Dataset`` and survive a parquet round trip."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentsgym.config import describe_validation_error
from agentsgym.errors import DatasetRowError

if TYPE_CHECKING:
    import datasets

__all__ = ["DatasetRow", "load_rows", "parse_rows", "rows_to_dataset"]


class DatasetRow(BaseModel):
    """One task for one env instance."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    env_class_path: str = Field(min_length=1, description="registered env id or module:Class")
    env_config: dict[str, Any] = Field(default_factory=dict)
    task_data: dict[str, Any]

    def env_key(self) -> tuple[str, str]:
        """Rows with equal keys share one env instance."""
        return self.env_class_path, json.dumps(self.env_config, sort_keys=True, default=str)


def rows_to_dataset(rows: Iterable[Mapping[str, Any] | DatasetRow]) -> datasets.Dataset:
    """A ``datasets.Dataset`` in the row schema (validating every row)."""
    import datasets

    columns = {
        "env_class_path": datasets.Value("string"),
        "env_config": datasets.Json(),
        "task_data": datasets.Json(),
    }
    records = [row.model_dump() for row in parse_rows(rows)]
    return datasets.Dataset.from_list(records, features=datasets.Features(columns))


def parse_rows(rows: Iterable[Mapping[str, Any] | DatasetRow]) -> list[DatasetRow]:
    """Validate rows; a bad one raises DatasetRowError naming its index and field."""
    parsed = []
    for index, row in enumerate(rows):
        if isinstance(row, DatasetRow):
            parsed.append(row)
            continue
        if isinstance(row, Mapping):
            row = {k: _decode_json_field(k, v) for k, v in row.items()}
        try:
            parsed.append(DatasetRow.model_validate(row))
        except ValidationError as exc:
            raise DatasetRowError(
                describe_validation_error(exc, f"dataset row {index}")
                + "\nrows must be {env_class_path: str, env_config: dict, task_data: dict}"
            ) from None
    return parsed


def load_rows(path: str | Path) -> list[DatasetRow]:
    """Rows from a ``.parquet`` file (as ``rows_to_dataset`` writes) or a ``.jsonl`` file,
    read line by line: Arrow would merge the env_config keys of different envs into one
    struct and fill the gaps with nulls."""
    path = Path(path)
    if not path.exists():
        raise DatasetRowError(f"rows file {str(path)!r} does not exist")
    if path.suffix == ".parquet":
        import datasets

        return parse_rows(datasets.Dataset.from_parquet(str(path)))
    if path.suffix == ".jsonl":
        records = []
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DatasetRowError(f"{path}:{number} is not valid JSON: {exc}") from None
        return parse_rows(records)
    raise DatasetRowError(f"rows file {str(path)!r} must end in .parquet or .jsonl")


def _decode_json_field(key: str, value: Any) -> Any:
    # Rows read back from JSONL/CSV written by other tools may hold the dicts as text.
    if key in ("env_config", "task_data") and isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    if key == "env_config" and value is None:
        return {}
    return value
