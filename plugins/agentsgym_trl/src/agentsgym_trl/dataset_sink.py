"""``dataset-sink``: write rollout batches as a ``datasets.Dataset`` for training elsewhere.

Each step plays one batch with the given agent (any agent: a vLLM server through
``openai``, a local model, a scripted policy) and keeps its rows. At the end the rows
are written as a Hugging Face dataset, ``DIR/rollouts.parquet`` (load it with
``datasets.Dataset.from_parquet``), one row per trajectory with the padded token
fields of its group:

* ``full_token_ids``, ``full_attention_mask``, ``agent_token_mask``,
  ``per_token_rewards``, ``sampled_logprobs``: padded to the group's longest row
  (pad id, 0, 0, 0.0, 0.0), so a group stacks into a tensor as is;
* ``final_reward``, ``group_index`` (unique across the whole file), ``step``,
  ``task_data``, ``env_id``, ``messages``, ``session_id``, ``num_tokens``,
  ``num_agent_tokens``, ``has_logprobs``, ``token_sources``.

``unpadded=True`` writes the unpadded fields instead (``to_records`` of the batch).
Failed episodes are written only with ``include_failed=True``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from agentsgym import TrajectoryBatch
from agentsgym.runtime import TrainResult
from agentsgym_trl.batch_trainer import BatchTrainer

logger = logging.getLogger(__name__)

FILE_NAME = "rollouts.parquet"
SINK_STATE_FILE = "sink_rows.jsonl"
"""The rows collected up to a checkpoint (counters on the first line)."""


def batch_rows(
    batch: TrajectoryBatch, *, step: int = 0, group_offset: int = 0
) -> list[dict[str, Any]]:
    """One flat row per padded trajectory of ``batch`` (see the module docstring)."""
    rows: list[dict[str, Any]] = []
    for gi, group in enumerate(batch.groups):
        if not group.rows:
            continue
        fields = zip(
            group.rows,
            group.padded_full_token_ids,
            group.padded_full_attention_mask,
            group.padded_agent_token_mask,
            group.padded_per_token_rewards,
            group.padded_sampled_logprobs,
        )
        for (episode, segment), ids, attention, agent_mask, rewards, logprobs in fields:
            rows.append(
                {
                    "step": step,
                    "group_index": group_offset + gi,
                    "segment_index": segment,
                    "session_id": episode.session_id,
                    "env_id": episode.env_id,
                    "task_data": episode.task_data,
                    "final_reward": episode.final_reward,
                    "num_turns": episode.num_turns,
                    "truncated": episode.truncated,
                    "messages": episode.messages,
                    "full_token_ids": ids,
                    "full_attention_mask": attention,
                    "agent_token_mask": agent_mask,
                    "per_token_rewards": rewards,
                    "sampled_logprobs": logprobs,
                    "has_logprobs": episode.has_logprobs,
                    "num_tokens": len(episode.segments[segment]),
                    "num_agent_tokens": sum(episode.segments[segment].agent_mask),
                    "token_sources": sorted(
                        {s.token_source or "unspecified" for s in episode.steps}
                    ),
                }
            )
    return rows


def padded_features() -> Any:
    """The schema of :func:`batch_rows` (dict columns stored as JSON)."""
    import datasets

    int_ = datasets.Value("int64")
    ints = datasets.List(datasets.Value("int64"))
    floats = datasets.List(datasets.Value("float64"))
    return datasets.Features(
        {
            "step": int_,
            "group_index": int_,
            "segment_index": int_,
            "session_id": datasets.Value("string"),
            "env_id": datasets.Value("string"),
            "task_data": datasets.Json(),
            "final_reward": datasets.Value("float64"),
            "num_turns": int_,
            "truncated": datasets.Value("bool"),
            "messages": datasets.Json(),
            "full_token_ids": ints,
            "full_attention_mask": ints,
            "agent_token_mask": ints,
            "per_token_rewards": floats,
            "sampled_logprobs": floats,
            "has_logprobs": datasets.Value("bool"),
            "num_tokens": int_,
            "num_agent_tokens": int_,
            "token_sources": datasets.List(datasets.Value("string")),
        }
    )


def padded_rows_to_dataset(rows: list[dict[str, Any]]) -> Any:
    """:func:`batch_rows` output as a ``datasets.Dataset``."""
    import json

    import datasets

    features = padded_features()
    json_columns = [k for k, v in features.items() if isinstance(v, datasets.Json)]
    converted = [
        {**row, **{k: json.loads(json.dumps(row[k], default=str)) for k in json_columns}}
        for row in rows
    ]
    return datasets.Dataset.from_list(converted, features=features)


class DatasetSink(BatchTrainer):
    """Collects batches and writes them as a parquet ``datasets.Dataset``.

    :param output_dir: folder for ``rollouts.parquet``.
    :param unpadded: write the unpadded ``to_records`` fields instead of padded ones.
    :param include_failed: also write failed episodes (unpadded mode only keeps them).
    """

    def __init__(
        self,
        output_dir: str | Path = "agentsgym-rollouts",
        *,
        unpadded: bool = False,
        include_failed: bool = False,
        **ignored: Any,
    ) -> None:
        if ignored:
            logger.info("dataset-sink ignores options it has no use for: %s", sorted(ignored))
        self.output_dir = Path(output_dir)
        self.unpadded = unpadded
        self.include_failed = include_failed
        self.rows: list[dict[str, Any]] = []
        self._steps = 0
        self._groups = 0

    def consume(self, batch: TrajectoryBatch) -> dict[str, float]:
        self._steps += 1
        if not batch.tokenized:
            raise ValueError(
                "dataset-sink writes token fields, so the env needs a tokenizer (--tokenizer)"
            )
        if self.unpadded:
            new = batch.to_records(include_failed=self.include_failed)
            for record in new:
                record["step"] = self._steps
                record["group_index"] += self._groups
        else:
            new = batch_rows(batch, step=self._steps, group_offset=self._groups)
        self._groups += len(batch.groups)
        self.rows.extend(new)
        return {"rows_written": float(len(new))}

    @property
    def path(self) -> Path:
        return self.output_dir / FILE_NAME

    def save_state(self, folder: Path) -> None:
        """The rows collected so far (they are written as a dataset only at the end)."""
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / SINK_STATE_FILE).open("w", encoding="utf-8") as handle:
            handle.write(json.dumps({"steps": self._steps, "groups": self._groups}) + "\n")
            for row in self.rows:
                handle.write(json.dumps(row, default=str) + "\n")

    def load_state(self, folder: Path) -> None:
        with (folder / SINK_STATE_FILE).open(encoding="utf-8") as handle:
            counters = json.loads(handle.readline())
            self.rows = [json.loads(line) for line in handle if line.strip()]
        self._steps, self._groups = int(counters["steps"]), int(counters["groups"])

    def to_dataset(self) -> Any:
        """The collected rows as a ``datasets.Dataset``."""
        from agentsgym.runtime import records_to_dataset

        if self.unpadded:
            return records_to_dataset(self.rows)
        return padded_rows_to_dataset(self.rows)

    def finish(self, result: TrainResult) -> None:
        self.output_dir.mkdir(parents=True, exist_ok=True)
        if not self.rows:
            logger.warning("no rollouts to write (every episode failed?)")
        self.to_dataset().to_parquet(str(self.path))
        result.artifacts["dataset"] = str(self.path)
