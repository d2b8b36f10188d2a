"""Rollout records as a ``datasets.Dataset``: one fixed schema, dict columns as JSON."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import datasets


def rollout_features() -> dict[str, Any]:
    """The schema of rollout records (what ``agentsgym rollout --out`` writes)."""
    import datasets

    int_ = datasets.Value("int64")
    ints = datasets.List(datasets.Value("int64"))
    return {
        "session_id": datasets.Value("string"),
        "env_id": datasets.Value("string"),
        "task_index": int_,
        "rollout_index": int_,
        "episode_index": int_,
        "group_index": int_,
        "segment_index": int_,
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
        "num_segments": int_,
        "full_token_ids": ints,
        "full_attention_mask": ints,
        "agent_token_mask": ints,
        "per_token_rewards": datasets.List(datasets.Value("float64")),
        "num_tokens": int_,
        "num_agent_tokens": int_,
    }


def records_to_dataset(records: list[dict[str, Any]]) -> datasets.Dataset:
    """Rollout records as a Dataset: missing columns are None; dict columns and keys
    outside the schema (added by callers, e.g. evaluation results) are stored as JSON."""
    import datasets

    known = rollout_features()
    keys = list(dict.fromkeys(k for record in records for k in record))  # first-seen order
    features = datasets.Features({k: known.get(k, datasets.Json()) for k in keys})
    as_json = {k for k in keys if isinstance(features[k], datasets.Json)}
    rows = [{k: _jsonable(r.get(k)) if k in as_json else r.get(k) for k in keys} for r in records]
    return datasets.Dataset.from_list(rows, features=features)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))
