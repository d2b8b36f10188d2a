"""check_env's check of an env's datasets: rows of the row schema that name this env
and build, a parquet round trip that changes nothing, and eval tasks kept out of train."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentsgym.registry import get_registry
from agentsgym.rows import parse_rows
from agentsgym.testing.check_report import CheckFailed, require

__all__ = ["ROWS_CHECKED", "check_disjoint", "check_splits"]

ROWS_CHECKED = 50
"""The rows of each split whose env id is resolved and whose env is built."""

Build = Callable[[str, dict[str, Any]], Any]


def check_splits(env: Any, spec_id: str, build: Build) -> dict[str, list[dict[str, Any]]]:
    """The task_data of each split ``env`` ships, by split, each split checked;
    ``build(env_id, env_config)`` builds (and keeps, to close) an env a row names."""
    tasks: dict[str, list[dict[str, Any]]] = {}
    for split, getter in (("train", env.get_train_dataset), ("eval", env.get_eval_dataset)):
        try:
            dataset = getter()
        except NotImplementedError:
            continue
        tasks[split] = _check_split(split, dataset, env.env_id, spec_id, build)
    return tasks


def check_disjoint(tasks: dict[str, list[dict[str, Any]]]) -> None:
    """Fail when an eval task is also a train task."""
    if "train" in tasks and "eval" in tasks:
        train = {json.dumps(t, sort_keys=True) for t in tasks["train"]}
        overlap = [t for t in tasks["eval"] if json.dumps(t, sort_keys=True) in train]
        if overlap:
            raise CheckFailed(f"{len(overlap)} eval tasks also in train, e.g. {overlap[0]}")


def _check_split(
    split: str, dataset: Any, env_id: str, spec_id: str, build: Build
) -> list[dict[str, Any]]:
    import datasets

    rows = parse_rows(dataset)
    require(rows, f"{split} dataset is empty")
    built: set[Any] = set()
    for row in rows[:ROWS_CHECKED]:
        named = row.env_class_path
        same_env = get_registry().resolve(named, allow_remote=True).id == spec_id
        require(same_env or named == env_id, f"{split} row names {named!r}")
        if row.env_key() not in built:  # one env per distinct (env, env_config) of the rows
            built.add(row.env_key())
            build(named, row.env_config)
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "rows.parquet")
        dataset.to_parquet(path)
        again = datasets.Dataset.from_parquet(path)
        require(again.to_list() == dataset.to_list(), "parquet round trip changed rows")
    return [row.task_data for row in rows]
