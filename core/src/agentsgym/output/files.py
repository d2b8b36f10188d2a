"""Reading and writing whole rollout files (parquet or JSON lines) that ``datasets`` loads."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentsgym.errors import OutputError, OutputExistsError
from agentsgym.output.paths import OutputPaths
from agentsgym.trajectory import records_to_dataset

if TYPE_CHECKING:
    import datasets

SUFFIXES = (".parquet", ".jsonl")


def check_output_path(
    path: str | Path, *, mode: str | None = None, with_summary: bool = False
) -> Path:
    """Fail before any episode is played if the output cannot be written (wrong suffix,
    a folder, a folder that cannot be created or written); create its folder. With
    ``mode="new"`` an output that exists is refused here too, before a command loads a
    model (see :func:`refuse_existing_output`)."""
    out = Path(path)
    if out.suffix not in SUFFIXES:
        raise OutputError(
            f"output file {str(out)!r} must end in .parquet or .jsonl (got {out.suffix!r})"
        )
    if out.is_dir():
        raise OutputError(
            f"output {str(out)!r} is a folder; give a file path such as "
            f"{str(out / 'rollouts.parquet')!r}"
        )
    parent = out.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise OutputError(
            f"cannot create the folder of {str(out)!r}: a part of {str(parent)!r} is a file, "
            "not a folder; choose another --out"
        ) from None
    except OSError as exc:
        raise OutputError(
            f"cannot create the folder {str(parent)!r} for {str(out)!r}: "
            f"{exc.strerror or exc}; choose another --out"
        ) from None
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(
            f"cannot write {str(out)!r}: the folder {str(parent)!r} is not writable by this "
            "user; choose another --out or fix the folder's permissions"
        )
    if mode == "new":
        refuse_existing_output(out, with_summary=with_summary)
    return out


def refuse_existing_output(out: Path, *, with_summary: bool = False) -> None:
    """Raise :class:`OutputExistsError` if any file of the run writing ``out`` exists
    (eval's summary too, ``with_summary``): a new run never overwrites one silently."""
    existing = OutputPaths(out).existing(with_summary=with_summary)
    if existing:
        names = ", ".join(p.name for p in existing)
        raise OutputExistsError(
            f"{str(out)!r} already exists ({names}). Give --resume to continue the run that "
            "wrote it, --overwrite to replace it, or choose another --out"
        )


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
    """Load a rollout file written by :func:`write_records` or a finished run."""
    import datasets

    out = Path(path)
    if out.suffix == ".parquet":
        return datasets.Dataset.from_parquet(str(out))
    return datasets.Dataset.from_json(str(out))
