"""Reading rollout and eval files for the viewer, forgiving where it can be.

``agentsgym rollout --out`` and ``agentsgym eval --out`` write parquet or JSON lines
(:func:`agentsgym.output.write_records`). Files met in practice are not always whole: a
run killed mid-write leaves a cut JSON line, a newer agentsgym may add columns, a
user may point the viewer at the wrong parquet. So:

* a missing file, an unreadable parquet, a file that is not a rollout or eval file,
  or a file with no readable row raises :class:`TrajectoryFileError` (one message
  that says what is wrong and what to do);
* a cut or broken JSON line, a row whose fields have the wrong types, and columns
  the viewer does not know are skipped with a warning (logged, and kept on
  :attr:`TrajectoryFile.warnings`), and every other row is shown.

The run record beside the file (``FILE.run.json``), when there is a readable one,
says which command made it (:class:`RunRecord`, secrets redacted); it is context, so
a missing or damaged one is no problem.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentsgym.cli import OutputPaths
from agentsgym_viewer.errors import TrajectoryFileError
from agentsgym_viewer.model import FileKind, RunRecord, TokenFields, ViewedEpisode

logger = logging.getLogger(__name__)

SUFFIXES = (".parquet", ".jsonl", ".json")
TOKEN_COLUMNS = ("full_token_ids", "agent_token_mask", "per_token_rewards")
# Written by agentsgym but derivable, or not shown (policy versions), so not kept.
IGNORED_COLUMNS = frozenset(
    {
        "full_attention_mask",
        "num_tokens",
        "num_agent_tokens",
        "step_token_sources",
        "step_policy_versions",
        "per_token_policy_versions",
        "min_policy_version",
        "max_policy_version",
        "trial_rows",  # how many rows a trial of several roles has (--resume reads it)
        "outcome",  # an eval row's role outcome: the final reward shows it
    }
)
EPISODE_COLUMNS = frozenset(ViewedEpisode.model_fields) - {"index", "kind", "tokens"}
KNOWN_COLUMNS = EPISODE_COLUMNS | frozenset(TOKEN_COLUMNS) | IGNORED_COLUMNS
# Columns holding JSON values; a parquet may store them as JSON text.
JSON_COLUMNS = frozenset(
    {"task_data", "metrics", "messages", "step_infos", "step_rewards", "step_reward_terms"}
)
MAX_LINE_WARNINGS = 5


@dataclass
class TrajectoryFile:
    """The episodes of one rollout or eval file, in file order."""

    path: Path
    kind: FileKind
    episodes: list[ViewedEpisode]
    warnings: list[str] = field(default_factory=list)
    num_rows: int = 0
    """Rows in the file, including the ones skipped with a warning."""
    run: RunRecord | None = None
    """The run that wrote the file, from its run record (None: no readable record)."""

    @property
    def env_ids(self) -> list[str]:
        """The distinct env ids of the file, sorted."""
        return sorted({e.env_id for e in self.episodes if e.env_id is not None})

    @property
    def has_tokens(self) -> bool:
        return any(e.tokens is not None for e in self.episodes)

    def by_index(self, index: int) -> ViewedEpisode | None:
        """The episode of row ``index`` (``#index`` in the views), or None if skipped."""
        if 0 <= index < len(self.episodes) and self.episodes[index].index == index:
            return self.episodes[index]
        return next((e for e in self.episodes if e.index == index), None)


class _Warnings:
    """Collects warnings; per-line ones are logged for the first few, then counted."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.line_problems = 0

    def add(self, message: str) -> None:
        self.messages.append(message)
        logger.warning("%s", message)

    def add_row_problem(self, message: str) -> None:
        self.line_problems += 1
        if self.line_problems <= MAX_LINE_WARNINGS:
            self.add(message)
        else:
            self.messages.append(message)

    def finish(self) -> None:
        hidden = self.line_problems - MAX_LINE_WARNINGS
        if hidden > 0:
            logger.warning("... and %d more skipped rows (see TrajectoryFile.warnings)", hidden)


def load_trajectories(path: str | Path) -> TrajectoryFile:
    """Load a rollout or eval file written by agentsgym (parquet or JSON lines).

    :raises TrajectoryFileError: the file is missing, unreadable, not a rollout or
        eval file, or has no readable row.
    """
    path = Path(path)
    if not path.exists():
        raise TrajectoryFileError(
            f"{str(path)!r} does not exist; give a file written by `agentsgym rollout --out` "
            "or `agentsgym eval --out`"
        )
    if path.is_dir():
        raise TrajectoryFileError(f"{str(path)!r} is a folder; give a .parquet or .jsonl file")
    if path.suffix not in SUFFIXES:
        raise TrajectoryFileError(
            f"{str(path)!r} must end in .parquet or .jsonl (got {path.suffix!r}): the viewer "
            "reads the files `agentsgym rollout --out` and `agentsgym eval --out` write"
        )
    warnings = _Warnings()
    if path.suffix == ".parquet":
        columns, rows = _parquet_rows(path)
    else:
        columns, rows = _jsonl_rows(path, warnings)
    kind = _file_kind(path, columns)
    unknown = sorted(set(columns) - KNOWN_COLUMNS)
    if unknown:
        warnings.add(
            f"{path.name}: ignoring columns the viewer does not know: {', '.join(unknown)} "
            "(a newer agentsgym, or columns added by hand)"
        )
    run = _run_record(path)
    default_env = None
    if kind == "eval":  # eval rows have no env id: the summary or the run record has it
        default_env = _eval_env_id(path) or (run.env_id if run is not None else None)
    episodes: list[ViewedEpisode] = []
    num_rows = 0
    for index, row in rows:
        num_rows += 1
        episode = _episode(row, index, kind, default_env, path, warnings)
        if episode is not None:
            episodes.append(episode)
    warnings.finish()
    if not episodes:
        raise TrajectoryFileError(
            f"{str(path)!r} has no readable episode ({num_rows} rows"
            + (f", {warnings.line_problems} skipped" if warnings.line_problems else "")
            + "); write it again with `agentsgym rollout --out` or `agentsgym eval --out`"
        )
    return TrajectoryFile(path, kind, episodes, warnings.messages, num_rows, run)


# ---------------------------------------------------------------------- formats
def _parquet_rows(path: Path) -> tuple[list[str], Iterator[tuple[int, dict[str, Any]]]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise TrajectoryFileError(
            f"{str(path)!r} is not a readable parquet file ({exc}); was it cut short? Write it "
            "again with `agentsgym rollout --out`"
        ) from None
    schema = parquet.schema_arrow
    names = list(schema.names)
    json_type = getattr(pa, "JsonType", None)
    json_columns = {
        f.name for f in schema if json_type is not None and isinstance(f.type, json_type)
    }
    wanted = [n for n in names if n in KNOWN_COLUMNS and n not in IGNORED_COLUMNS]

    def rows() -> Iterator[tuple[int, dict[str, Any]]]:
        index = 0
        try:
            for batch in parquet.iter_batches(batch_size=256, columns=wanted):
                names_here = batch.schema.names
                tokens = {
                    n: _list_slices(batch.column(n)) for n in TOKEN_COLUMNS if n in names_here
                }
                plain = batch.select([n for n in names_here if n not in tokens]).to_pylist()
                for k, row in enumerate(plain):
                    for name in json_columns.intersection(row):
                        row[name] = _json_value(row[name])
                    for name, values in tokens.items():
                        row[name] = values[k]
                    yield index, row
                    index += 1
        except (pa.ArrowException, OSError) as exc:
            raise TrajectoryFileError(
                f"{str(path)!r}: could not read row {index} onwards ({exc}); the file is "
                "damaged, write it again"
            ) from None

    return names, rows()


def _list_slices(column: Any) -> list[Any]:
    """A list column as one numpy array per row (None for nulls), without Python lists."""
    import pyarrow as pa

    if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)):
        return list(column.to_pylist())
    if column.values.null_count:
        return list(column.to_pylist())
    offsets = column.offsets.to_numpy()
    values = column.values.to_numpy(zero_copy_only=False)
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    return [
        values[offsets[k] : offsets[k + 1]].copy() if valid[k] else None for k in range(len(column))
    ]


def _json_value(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _jsonl_rows(
    path: Path, warnings: _Warnings
) -> tuple[list[str], Iterator[tuple[int, dict[str, Any]]]]:
    parsed: list[tuple[int, dict[str, Any]]] = []
    columns: list[str] = []
    seen: set[str] = set()
    broken: list[tuple[int, str]] = []
    last_line = 0
    try:
        with path.open("r", encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                last_line = number
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    broken.append((number, f"is not valid JSON ({exc.msg})"))
                    continue
                if not isinstance(row, dict):
                    broken.append((number, f"is a JSON {type(row).__name__}, not an object"))
                    continue
                for key in row:
                    if key not in seen:
                        seen.add(key)
                        columns.append(key)
                parsed.append((len(parsed), row))
    except OSError as exc:
        raise TrajectoryFileError(f"cannot read {str(path)!r}: {exc}") from None
    for number, problem in broken:
        if number == last_line and problem.startswith("is not valid JSON"):
            problem = "is cut short (was the run killed while writing?)"
        warnings.add_row_problem(f"{path.name} line {number} {problem}; skipped")
    if not parsed and not warnings.line_problems:
        raise TrajectoryFileError(
            f"{str(path)!r} is empty; write rollouts with `agentsgym rollout --out FILE.jsonl`"
        )
    if not parsed:
        raise TrajectoryFileError(
            f"{str(path)!r} has no readable line ({warnings.line_problems} broken); is it a "
            "JSON lines file written by agentsgym?"
        )
    return columns, iter(parsed)


# ---------------------------------------------------------------------- rows
def _file_kind(path: Path, columns: list[str]) -> FileKind:
    have = set(columns)
    if {"final_reward", "messages"} <= have:
        if "env_id" in have or "session_id" in have:
            return "rollout"
        if "correct" in have or "task_index" in have:
            return "eval"
    hint = ""
    if "env_class_path" in have:
        hint = (
            " It looks like a dataset rows file (the input of `agentsgym rollout --dataset`); "
            "play it first with `agentsgym rollout --dataset FILE --out rollouts.parquet`."
        )
    shown = ", ".join(columns[:12]) + (", ..." if len(columns) > 12 else "")
    raise TrajectoryFileError(
        f"{str(path)!r} is not a rollout or eval file: it has the columns [{shown}], but "
        "rollout files (`agentsgym rollout --out`) and eval files (`agentsgym eval --out`) "
        f"have final_reward, messages and env_id or correct.{hint}"
    )


def _eval_env_id(path: Path) -> str | None:
    """An eval file's env id, from the summary JSON `agentsgym eval` writes next to it."""
    summary = OutputPaths(path).summary
    try:
        env_id = json.loads(summary.read_text(encoding="utf-8")).get("env_id")
    except (OSError, ValueError, AttributeError):
        return None
    return env_id if isinstance(env_id, str) else None


def _run_record(path: Path) -> RunRecord | None:
    """The run record beside ``path``, or None when there is no readable one."""
    record = OutputPaths(path).manifest
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        logger.info("not showing the run record %s: %s", record, exc)
        return None
    return RunRecord.from_json(data)


def _episode(
    row: dict[str, Any],
    index: int,
    kind: FileKind,
    default_env: str | None,
    path: Path,
    warnings: _Warnings,
) -> ViewedEpisode | None:
    fields = {k: row[k] for k in EPISODE_COLUMNS if k in row}
    for name in JSON_COLUMNS.intersection(fields):
        fields[name] = _json_value(fields[name])
    if fields.get("env_id") is None and default_env is not None:
        fields["env_id"] = default_env
    try:
        episode = ViewedEpisode(index=index, kind=kind, **fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        warnings.add_row_problem(f"{path.name} row {index}: {where}: {first['msg']}; skipped")
        return None
    tokens = _tokens(row, index, path, warnings)
    if tokens is not None:
        episode = episode.model_copy(update={"tokens": tokens})
    return episode


def _tokens(row: dict[str, Any], index: int, path: Path, warnings: _Warnings) -> TokenFields | None:
    ids = row.get("full_token_ids")
    if ids is None:
        return None
    mask = row.get("agent_token_mask")
    rewards = row.get("per_token_rewards")
    if mask is None or rewards is None:
        warnings.add_row_problem(
            f"{path.name} row {index}: token ids without an agent mask or per-token rewards; "
            "showing it without tokens"
        )
        return None
    try:
        return TokenFields.from_values(ids, mask, rewards)
    except ValueError as exc:
        warnings.add_row_problem(f"{path.name} row {index}: {exc}; showing it without tokens")
        return None
