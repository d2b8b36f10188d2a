"""Loading a benchmark's raw rows: a Hugging Face dataset or local files.

``dataset`` in env_config is one of:

* a Hugging Face dataset name (``"openai/gsm8k"``, with ``dataset_config="main"``),
  loaded with :func:`datasets.load_dataset`, split by split;
* a local ``.json``/``.jsonl``/``.parquet`` file: a benchmark file, served as the
  **eval** split (there is then no train split, so train and eval stay disjoint);
* ``{split: file}``, e.g. ``{"train": "train.jsonl", "test": "test.jsonl"}``.

Failures raise :class:`DatasetLoadError` saying what to do, e.g. when offline.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentsgym_classical.errors import DatasetLoadError, NoSuchSplitError

logger = logging.getLogger(__name__)

LOCAL_SUFFIXES = (".json", ".jsonl", ".parquet")


def is_local(name: str) -> bool:
    """A path to a local file (by suffix or existence), as opposed to a hub name."""
    if name.endswith(LOCAL_SUFFIXES):
        return True
    try:
        return Path(name).expanduser().exists()
    except (OSError, ValueError):  # a name too long for a path, or with a NUL: not a file
        return False


def describe(dataset: str | Mapping[str, str], dataset_config: str | None = None) -> str:
    """How a source is named in messages and row ids."""
    if isinstance(dataset, Mapping):
        return "files " + ", ".join(f"{k}={v}" for k, v in dataset.items())
    if is_local(dataset):
        return f"file {dataset}"
    return f"dataset {dataset}" + (f" ({dataset_config})" if dataset_config else "")


def load_split(
    dataset: str | Mapping[str, str],
    split: str,
    *,
    role: str,
    dataset_config: str | None = None,
    other_split: str | None = None,
) -> list[dict[str, Any]]:
    """The raw rows of ``split`` (``role`` is ``"train"`` or ``"eval"``, for local files).

    ``other_split`` is the split the other role reads (``None``: it has none): when this
    one is missing but that one is there, the error says to play it with ``--split``.
    """
    if isinstance(dataset, Mapping):
        if split not in dataset:
            raise NoSuchSplitError(_missing_file_split(dataset, split, role, other_split))
        return read_file(dataset[split])
    if is_local(dataset):
        # A missing file is that, whatever split was asked for: say so before
        # explaining splits, which would send the user after the wrong problem.
        existing_file(dataset)
        if role != "eval":
            raise NoSuchSplitError(
                f"{dataset} is one file, served as the eval split only, so it has no {role} "
                "split. Play it with `--split eval`, or to train give one file per split: "
                'dataset={"train": "train.jsonl", "test": "test.jsonl"}'
            )
        return read_file(dataset)
    return load_hub_split(dataset, split, dataset_config)


def _missing_file_split(
    files: Mapping[str, str], split: str, role: str, other_split: str | None
) -> str:
    other_role = "eval" if role == "train" else "train"
    fixes = []
    if other_split is not None and other_split in files:
        fixes.append(f"play the {other_role} split ({other_split!r}) with `--split {other_role}`")
    fixes.append(f"add a {split!r} file to env_config dataset")
    # the other role's split is taken: train and eval must stay disjoint
    free = [name for name in sorted(files) if name != other_split]
    if free:
        fixes.append(f"set {role}_split to one of {free}")
    return f"no {split!r} split among the files {dict(files)}; " + ", or ".join(fixes)


def existing_file(path_text: str) -> Path:
    """The path of a local dataset file, or a :class:`DatasetLoadError` saying where it
    was looked for when there is no file there."""
    path = Path(path_text).expanduser()
    try:
        found = path.is_file()
    except (OSError, ValueError) as exc:  # e.g. a name longer than the OS takes
        raise DatasetLoadError(
            f"dataset file {str(path)[:200]!r} cannot be a path: {exc}"
        ) from None
    if not found:
        what = "is a folder, not a file" if path.is_dir() else "does not exist"
        raise DatasetLoadError(
            f"dataset file {path_text!r} {what} (looked for {os.path.abspath(path)}). Check "
            "env_config dataset (a relative path is read from the working directory), or "
            "leave it unset to play the embedded generated problems."
        )
    return path


def read_file(path_text: str) -> list[dict[str, Any]]:
    """Rows of a ``.json`` (a list, or JSON lines), ``.jsonl`` or ``.parquet`` file."""
    path = existing_file(path_text)
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            rows = pq.read_table(path).to_pylist()
        else:
            rows = _read_json_rows(path)
    except DatasetLoadError:
        raise
    except Exception as exc:
        raise DatasetLoadError(f"could not read dataset file {str(path)!r}: {exc}") from exc
    if not all(isinstance(row, dict) for row in rows):
        raise DatasetLoadError(f"{str(path)!r} must hold one JSON object (a row) per problem")
    return rows


def _read_json_rows(path: Path) -> list[Any]:
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        return list(json.loads(text))
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DatasetLoadError(
                    f"{str(path)!r} line {number} is not valid JSON: {exc}"
                ) from None
    return rows


def load_hub_split(name: str, split: str, dataset_config: str | None) -> list[dict[str, Any]]:
    """A split of a Hugging Face dataset (from the local cache when offline)."""
    import datasets

    try:
        loaded = datasets.load_dataset(name, dataset_config, split=split)
    except Exception as exc:
        cause = f"{type(exc).__name__}: {str(exc)[:300]}"
        if "split" in str(exc).lower() and "unknown" in str(exc).lower():
            raise NoSuchSplitError(
                f"Hugging Face dataset {name!r} has no split {split!r} ({cause}); set "
                "env_config train_split/eval_split to splits it has"
            ) from exc
        raise DatasetLoadError(
            f"could not load Hugging Face dataset {name!r}"
            + (f" (config {dataset_config!r})" if dataset_config else "")
            + f", split {split!r}: {cause}. Check the name and config. Without network access "
            "a hub dataset loads only if it is already in the local cache (set "
            "HF_HUB_OFFLINE=1 to skip the retries); otherwise export it to a .jsonl or .parquet "
            "file and set env_config dataset=/path/to/file, or leave dataset unset to use the "
            "embedded generated problems."
        ) from exc
    logger.info("loaded %d rows of %s split %s", len(loaded), name, split)
    return [dict(row) for row in loaded]
