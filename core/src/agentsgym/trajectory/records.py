"""Rollout records as a ``datasets.Dataset``: one fixed schema, dict columns as JSON."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import datasets


def rollout_features() -> dict[str, Any]:
    """The schema of rollout records (what ``agentsgym rollout --out`` writes)."""
    import datasets

    int_ = datasets.Value("int64")
    ints = datasets.List(datasets.Value("int64"))
    return {
        "session_id": datasets.Value("string"),
        "role": datasets.Value("string"),
        "env_id": datasets.Value("string"),
        "task_index": int_,
        "rollout_index": int_,
        "episode_index": int_,
        "group_index": int_,
        "segment_index": int_,
        "trial_rows": int_,
        "task_data": datasets.Json(),
        "final_reward": datasets.Value("float64"),
        "num_turns": int_,
        "truncated": datasets.Value("bool"),
        "free_shot": datasets.Value("bool"),
        "error": datasets.Value("string"),
        "metrics": datasets.Json(),
        "messages": datasets.Json(),
        "step_infos": datasets.Json(),
        "step_rewards": datasets.List(datasets.Value("float64")),
        "step_reward_terms": datasets.Json(),
        "step_token_sources": datasets.List(datasets.Value("string")),
        "step_policy_versions": ints,
        "min_policy_version": int_,
        "max_policy_version": int_,
        "num_segments": int_,
        "full_token_ids": ints,
        "full_attention_mask": ints,
        "agent_token_mask": ints,
        "per_token_rewards": datasets.List(datasets.Value("float64")),
        "per_token_policy_versions": ints,
        "num_tokens": int_,
        "num_agent_tokens": int_,
    }


CHUNK_ROWS = 128
"""Rows converted at a time: the Python temporaries of a conversion stay this small."""


def records_to_dataset(
    records: list[dict[str, Any]], *, token_arrays: list[dict[str, np.ndarray] | None] | None = None
) -> datasets.Dataset:
    """Rollout records as a Dataset: missing columns are None; dict columns and keys
    outside the schema (added by callers, e.g. evaluation results) are stored as JSON.
    ``token_arrays`` (per record, its list columns as numpy arrays, or None) fill those
    columns straight into arrow buffers, without Python lists."""
    import datasets
    import pyarrow as pa

    known = rollout_features()
    keys = list(dict.fromkeys(k for record in records for k in record))  # first-seen order
    features = datasets.Features({k: known.get(k, datasets.Json()) for k in keys})
    as_json = {k for k in keys if isinstance(features[k], datasets.Json)}
    tables = []
    for start in range(0, max(len(records), 1), CHUNK_ROWS):
        chunk = records[start : start + CHUNK_ROWS]
        rows = [{k: _jsonable(r.get(k)) if k in as_json else r.get(k) for k in keys} for r in chunk]
        table = datasets.Dataset.from_list(rows, features=features).data.table
        if token_arrays is not None:
            table = _fill_list_columns(table, token_arrays[start : start + CHUNK_ROWS], features)
        tables.append(table)
    table = datasets.table.InMemoryTable(pa.concat_tables(tables))
    info = datasets.DatasetInfo(features=features)
    # A fingerprint of our own: datasets would pickle the whole table to hash it.
    fingerprint = datasets.fingerprint.generate_random_fingerprint()
    return datasets.Dataset(table, info=info, fingerprint=fingerprint)


def _fill_list_columns(
    table: Any, arrays: list[dict[str, np.ndarray] | None], features: Any
) -> Any:
    import pyarrow as pa

    for name in next((a for a in arrays if a is not None), {}):
        columns = [None if a is None else a[name] for a in arrays]
        offsets = np.zeros(len(columns) + 1, dtype=np.int32)
        np.cumsum([0 if c is None else len(c) for c in columns], out=offsets[1:])
        dtype = np.dtype(features[name].feature.dtype)
        buffer = pa.allocate_buffer(int(offsets[-1]) * dtype.itemsize)
        values = np.frombuffer(buffer, dtype=dtype)
        for column, at in zip(columns, offsets):
            if column is not None:
                values[at : at + len(column)] = column
        flat = pa.Array.from_buffers(pa.from_numpy_dtype(dtype), len(values), [None, buffer])
        nulls = pa.array([c is None for c in columns])
        column = pa.ListArray.from_arrays(pa.array(offsets), flat, mask=nulls)
        table = table.set_column(table.schema.get_field_index(name), name, column)
    return table


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))
