"""``agentsgym train``: checkpoints every N steps, ``--resume`` from the newest one.

A run that stops after a checkpoint (here: a run of fewer steps, or one whose last
checkpoint is all a crash left) is continued by the same command with ``--resume``:
the steps after the checkpoint are played, the ones before it are not, and the step
log holds every step once. An output folder with an earlier run is never trained
over silently, and a resume with other arguments is refused.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from agentsgym.testing import run_cli
from agentsgym_trl import commands
from agentsgym_trl.checkpoints import RUN_STATE_FILE, complete_checkpoints
from agentsgym_trl.train_checkpoints import LOCK_FILE
from checkpointed_runs import CHECKPOINTED_RUN, GUESS, warm_tiny_model

SMALL = CHECKPOINTED_RUN

pytestmark = pytest.mark.usefixtures("torch_single_thread")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: Any) -> Path:
    return warm_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def train(out: Path, *args: str) -> Any:
    return run_cli("train", GUESS, "--output-dir", str(out), *SMALL, *args)


def logged_steps(out: Path) -> list[int]:
    lines = (out / "train_log.jsonl").read_text().splitlines()
    return [json.loads(line)["step"] for line in lines]


@pytest.mark.parametrize(
    ("trainer", "extra"),
    [
        ("per-token-grpo", ["--model", "MODEL", "--trainer-option", "beta=0.04"]),
        ("trl-grpo", ["--model", "MODEL"]),
        ("dataset-sink", []),
    ],
)
def test_resume_continues_after_the_newest_checkpoint(
    trainer: str, extra: list[str], model_dir: Path, tmp_path: Path
) -> None:
    extra = [str(model_dir) if a == "MODEL" else a for a in extra]
    out = tmp_path / trainer
    first = train(out, "--trainer", trainer, "--max-steps", "2", *extra)
    assert first.code == 0, first.output
    assert [step for step, _ in complete_checkpoints(out)] == [1, 2]
    state = json.loads((out / "checkpoint-2" / RUN_STATE_FILE).read_text())
    assert [s["step"] for s in state["steps"]] == [1, 2] and state["arguments"][
        "trainer"
    ] == trainer

    # A crash after step 2 left checkpoint-2; the same command with --resume goes on.
    before = (out / "train_log.jsonl").read_text().splitlines()
    (out / "train_log.jsonl").unlink()
    second = train(out, "--trainer", trainer, "--max-steps", "4", "--resume", *extra)
    assert second.code == 0, second.output
    assert "resuming from" in second.output and "checkpoint-2" in second.output
    assert logged_steps(out) == [1, 2, 3, 4]
    # steps 1-2 come from the checkpoint as they were (their timings too): not played again
    after = (out / "train_log.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in after[:2]] == [json.loads(x) for x in before]
    assert [step for step, _ in complete_checkpoints(out)] == [3, 4]  # the newest two
    # what training played: the first run's steps, then the resumed run's, in one file
    played = [json.loads(line) for line in (out / "played.jsonl").read_text().splitlines()]
    assert len(played) == 4 * 2 and all(row["error"] is None for row in played)
    groups = [row["group_index"] for row in played]
    assert groups == sorted(groups) and len(set(groups)) == len(played) // (
        1 if trainer == "trl-grpo" else 2
    )
    if trainer == "dataset-sink":
        import datasets

        written = datasets.Dataset.from_parquet(str(out / "rollouts.parquet"))
        assert sorted(set(written["step"])) == [1, 2, 3, 4]
        assert len(written) == 4 * 2  # one task of two rollouts per step, none twice
    if trainer == "per-token-grpo":
        # the optimizer went on from the checkpoint's: four steps of AdamW in all
        saved = torch.load(out / "checkpoint-4" / "trainer_state.pt", weights_only=False)
        steps = {int(s["step"]) for s in saved["optimizer"]["state"].values()}
        assert steps == {4}
    if trainer == "trl-grpo":
        trl_state = json.loads((out / "checkpoint-4" / "trainer_state.json").read_text())
        assert trl_state["global_step"] == 4


def test_an_earlier_run_is_never_trained_over_silently(model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "sink"
    assert train(out, "--trainer", "dataset-sink", "--max-steps", "1").code == 0
    again = train(out, "--trainer", "dataset-sink", "--max-steps", "1")
    assert again.code == 2 and "--resume to continue it or --overwrite" in again.stderr
    assert "Traceback" not in again.output
    changed = train(
        out, "--trainer", "dataset-sink", "--max-steps", "2", "--resume", "--num-rollouts", "3"
    )
    assert changed.code == 2
    assert "num_rollouts: 2 in the checkpoint, 3 now" in changed.stderr
    fresh = train(out, "--trainer", "dataset-sink", "--max-steps", "1", "--overwrite")
    assert fresh.code == 0, fresh.output
    assert logged_steps(out) == [1]


def test_resume_without_a_checkpoint_starts_the_run_and_a_torn_one_is_skipped(
    tmp_path: Path,
) -> None:
    out = tmp_path / "sink"
    started = train(out, "--trainer", "dataset-sink", "--max-steps", "2", "--resume")
    assert started.code == 0 and "no checkpoint" in started.output
    # checkpoint-2 as a process killed while writing it leaves it: no run state yet
    (out / "checkpoint-2" / RUN_STATE_FILE).unlink()
    shutil.copytree(out / "checkpoint-1", out / "checkpoint-1-copy")  # not a checkpoint name
    (out / "train_log.jsonl").unlink()
    resumed = train(out, "--trainer", "dataset-sink", "--max-steps", "2", "--resume")
    assert resumed.code == 0, resumed.output
    assert "checkpoint-1" in resumed.output and logged_steps(out) == [1, 2]


def test_a_resume_while_the_run_is_alive_is_refused(tmp_path: Path, monkeypatch: Any) -> None:
    """The output folder is locked while a run writes it, as rollout and eval lock
    --out: a --resume started beside the live run is refused, naming it, instead of
    reading checkpoints the live run prunes."""
    out = tmp_path / "sink"
    run = ["--trainer", "dataset-sink", "--max-steps", "1"]
    real = commands.train_with_progress
    beside: list[Any] = []
    tried: list[bool] = []

    def with_a_resume_beside(*args: Any, **kwargs: Any) -> Any:
        if not tried:  # once (an unlocked resume would come here too): then the steps
            tried.append(True)
            beside.append(train(out, *run, "--resume"))
        return real(*args, **kwargs)

    monkeypatch.setattr(commands, "train_with_progress", with_a_resume_beside)
    live = train(out, *run)
    assert live.code == 0, live.output
    [refused] = beside
    said = " ".join(refused.output.split())
    assert refused.code != 0, refused.output
    assert f"is being written by process {os.getpid()}" in said
    assert "agentsgym train" in said and "choose another --output-dir" in said
    assert not (out / LOCK_FILE).exists()  # released when the live run ended
    monkeypatch.undo()
    assert train(out, *run, "--resume").code == 0  # and free for the next run


def test_a_refused_run_leaves_no_folder_it_created(tmp_path: Path) -> None:
    """A run refused before it wrote anything (here an env id that is not registered)
    removes the --output-dir it created, and the folders it created to hold it; a
    folder that was there before stays."""
    out = tmp_path / "new" / "run"
    refused = run_cli("train", "agentsgym/NoSuchEnv-v0", "--output-dir", str(out), *SMALL)
    assert refused.code != 0 and "NoSuchEnv" in refused.output
    assert not (tmp_path / "new").exists()
    there = tmp_path / "there"
    there.mkdir()
    again = run_cli("train", "agentsgym/NoSuchEnv-v0", "--output-dir", str(there), *SMALL)
    assert again.code != 0 and there.is_dir() and not any(there.iterdir())
