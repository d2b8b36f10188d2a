"""``agentsgym train --async --max-staleness K``: rollouts played ahead of the trainer.

Every trained token's version is within the bound (the step log's staleness), every
played turn records its version, and a checkpoint keeps the source where its step's
rows were taken, so ``--resume`` neither replays an admitted step nor skips one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from agentsgym.testing import run_cli
from agentsgym_trl.checkpoints import RUN_STATE_FILE
from checkpointed_runs import (
    CHECKPOINTED_RUN,
    GUESS,
    assert_k0_trains_what_sync_trains,
    warm_tiny_model,
)

SMALL = [*CHECKPOINTED_RUN, "--trainer", "per-token-grpo"]

pytestmark = pytest.mark.usefixtures("torch_single_thread")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: Any) -> Path:
    return warm_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def train(out: Path, model_dir: Path, *args: str) -> Any:
    return run_cli(
        "train", GUESS, "--output-dir", str(out), "--model", str(model_dir), *SMALL, *args
    )


def log(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]


def test_async_training_stays_within_the_bound_and_records_every_version(
    model_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "async"
    result = train(out, model_dir, "--max-steps", "3", "--async", "--max-staleness", "1")
    assert result.code == 0, result.output
    steps = log(out)
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert all(0 <= s["staleness_max"] <= 1 and s["groups_discarded"] == 0 for s in steps)
    assert all("steps_throttled" in s and "groups_waiting" in s for s in steps)
    played = [json.loads(line) for line in (out / "played.jsonl").read_text().splitlines()]
    versions = [v for row in played for v in row["step_policy_versions"]]
    assert versions and all(v in (0, 1, 2) for v in versions)  # never unknown, never ahead


def test_async_resume_neither_replays_nor_skips_an_admitted_step(
    model_dir: Path, tmp_path: Path
) -> None:
    synchronous, streamed = tmp_path / "sync", tmp_path / "async"
    assert train(synchronous, model_dir, "--max-steps", "2").code == 0
    first = train(streamed, model_dir, "--max-steps", "2", "--async", "--max-staleness", "2")
    assert first.code == 0, first.output
    # the stream took rows for steps beyond 2; the checkpoint is where step 2's were taken
    sync_state = json.loads((synchronous / "checkpoint-2" / RUN_STATE_FILE).read_text())
    async_state = json.loads((streamed / "checkpoint-2" / RUN_STATE_FILE).read_text())
    assert async_state["source"] == sync_state["source"]
    resumed = train(
        streamed, model_dir, "--max-steps", "4", "--async", "--max-staleness", "2", "--resume"
    )
    assert resumed.code == 0, resumed.output
    assert [s["step"] for s in log(streamed)] == [1, 2, 3, 4]


def test_max_staleness_0_trains_what_the_synchronous_run_trains(
    model_dir: Path, tmp_path: Path
) -> None:
    """Bit for bit, as docs/training.md says it holds: one episode at a time."""
    assert_k0_trains_what_sync_trains(lambda out, *run: train(out, model_dir, *run), tmp_path)
