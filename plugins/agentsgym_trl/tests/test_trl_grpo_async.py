"""``trl-grpo --async --max-staleness K``: TRL's rollout function takes from a rollout stream.

No trained token is older than K versions (audited from the versions each token
recorded), the step log holds the stream's figures and the importance weights' spread,
K=0 trains exactly what the synchronous run trains, and ``--resume`` goes on from a
checkpoint without replaying or skipping a step.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

import agentsgym
from agentsgym.errors import TrainerOptionError
from agentsgym.testing import run_cli
from agentsgym.trainers import RolloutSource
from agentsgym_trl import TRLGRPOAdapter
from agentsgym_trl.train_async import stream_keywords
from checkpointed_runs import (
    CHECKPOINTED_RUN,
    GUESS,
    assert_k0_trains_what_sync_trains,
    warm_tiny_model,
)
from trainer_agents import ThinkingAgent

SMALL = [*CHECKPOINTED_RUN, "--trainer", "trl-grpo"]
"""One task of two rollouts per step, four tasks: an epoch of TRL's sampler is 4 steps."""

STREAM_FIELDS = (
    "staleness_mean",
    "staleness_max",
    "groups_waiting",
    "steps_throttled",
    "groups_discarded",
    "is_ratio_min",
    "is_ratio_mean",
    "is_ratio_max",
    "is_ratio_std",
)

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


def played(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "played.jsonl").read_text().splitlines()]


def test_no_trained_token_is_older_than_the_bound(model_dir: Path, tmp_path: Path) -> None:
    """The audit: every token of every step's batch was generated at most K updates
    before the step's own version, never after it; the stream's staleness says so."""
    adapter = TRLGRPOAdapter(
        str(model_dir), output_dir=tmp_path, learning_rate=1e-3, max_new_tokens=6
    )
    config = {"high": 3, "max_steps_per_episode": 2}
    env = agentsgym.make(GUESS, tokenizer=adapter.tokenizer, env_config=config)
    rows = list(env.get_train_dataset(size=4))
    source = RolloutSource(rows, tokenizer=adapter.tokenizer, num_rollouts=2, tasks_per_step=1)
    bound = 2
    audit: list[tuple[int, list[tuple[Any, Any]], float]] = []

    def on_step(metrics: Any) -> None:
        assert adapter.last_batch is not None
        versions = [
            (e.min_policy_version, e.max_policy_version)
            for group in adapter.last_batch.groups
            for e in group.episodes
        ]
        audit.append((metrics.step, versions, metrics.extra["staleness_max"]))

    result = adapter.train(source, max_steps=5, max_staleness=bound, on_step=on_step)
    assert [s.step for s in result.steps] == [1, 2, 3, 4, 5]
    for step, versions, staleness in audit:
        trained_at = step - 1  # the version of the weights step `step` updates
        assert len(versions) == 2, versions  # nothing discarded: a versioned agent
        assert all(
            low is not None and trained_at - bound <= low <= high <= trained_at
            for low, high in versions
        ), (step, versions)
        assert staleness == max(trained_at - low for low, _ in versions)
    # stale tokens are weighted by TRL's truncated importance ratio, not masked
    assert adapter.trainer.args.vllm_importance_sampling_mode == "token_truncate"
    assert all(s.extra["is_ratio_max"] <= 3.0 for s in result.steps)


class FrozenAgent(ThinkingAgent):
    """A given agent whose server never takes new weights: every reply says version 0."""

    def get_action(self, *args: Any, **kwargs: Any) -> Any:
        action, state = super().get_action(*args, **kwargs)
        action.policy_version = 0
        return action, state


def test_groups_over_the_bound_are_discarded_not_trained(model_dir: Path, tmp_path: Path) -> None:
    """An agent whose replies stay at version 0 falls behind the trainer: from step 2 on
    (K=0) its groups are over the bound, discarded and counted, and TRL gets failed,
    fully masked completions for them, never their tokens."""
    adapter = TRLGRPOAdapter(str(model_dir), output_dir=tmp_path, max_new_tokens=6)
    rows = [
        {
            "env_class_path": GUESS,
            "env_config": {"high": 3, "max_steps_per_episode": 2},
            "task_data": {"seed": seed},
        }
        for seed in range(2)
    ]
    source = RolloutSource(rows, tokenizer=adapter.tokenizer, num_rollouts=2, tasks_per_step=1)
    trained: list[int] = []
    result = adapter.train(
        source,
        max_steps=2,
        agent=FrozenAgent(adapter.tokenizer),
        max_staleness=0,
        on_step=lambda m: trained.append(len(adapter.last_batch.groups)),
    )
    first, second = (s.to_dict() for s in result.steps)
    assert first["groups_discarded"] == 0 and first["staleness_max"] == 0
    assert second["groups_discarded"] == 1 and second["num_rollouts"] == 0  # one GRPO group
    assert trained == [2, 0] and second["trained_rows"] == 0
    assert second["loss"] == 0.0 and second["grad_norm"] == 0.0  # nothing of theirs trains


def test_async_run_logs_the_stream_and_records_every_version(
    model_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "async"
    result = train(out, model_dir, "--max-steps", "5", "--async", "--max-staleness", "1")
    assert result.code == 0, result.output
    steps = log(out)
    assert [s["step"] for s in steps] == [1, 2, 3, 4, 5]  # across an epoch of TRL's sampler
    for step in steps:
        assert all(field in step for field in STREAM_FIELDS), sorted(step)
        assert 0 <= step["staleness_mean"] <= step["staleness_max"] <= 1
        assert step["groups_discarded"] == 0 and step["unversioned_episodes"] == 0
        assert step["is_ratio_std"] >= 0 and step["trl_reward"] is not None
    rows = played(out)
    assert len(rows) == 5 * 2  # one trial per prompt entry, only the steps trained
    assert all(v in range(5) for row in rows for v in row["step_policy_versions"])


def test_max_staleness_0_trains_what_the_synchronous_run_trains(
    model_dir: Path, tmp_path: Path
) -> None:
    assert_k0_trains_what_sync_trains(lambda out, *run: train(out, model_dir, *run), tmp_path)


def test_async_resume_neither_replays_nor_skips_a_step(model_dir: Path, tmp_path: Path) -> None:
    synchronous, streamed = tmp_path / "sync", tmp_path / "async"
    assert train(synchronous, model_dir, "--max-steps", "5").code == 0
    first = train(streamed, model_dir, "--max-steps", "2", "--async", "--max-staleness", "2")
    assert first.code == 0, first.output
    resumed = train(
        streamed, model_dir, "--max-steps", "5", "--async", "--max-staleness", "2", "--resume"
    )
    assert resumed.code == 0, resumed.output
    assert "resuming from" in resumed.output and "checkpoint-2" in resumed.output
    steps = log(streamed)
    assert [s["step"] for s in steps] == [1, 2, 3, 4, 5]
    assert all(s["staleness_max"] <= 2 for s in steps)
    state = json.loads((streamed / "checkpoint-5" / "trainer_state.json").read_text())
    assert state["global_step"] == 5

    def tasks(out: Path) -> Counter[str]:  # each step's two entries are one task
        rows = played(out)
        return Counter(json.dumps(rows[i]["task_data"]) for i in range(0, len(rows), 2))

    # the same tasks as the uninterrupted run, each step once (the stream plays no step
    # beyond the run's last, and the resumed one starts after the checkpoint's)
    assert len(played(streamed)) == 5 * 2
    assert tasks(streamed) == tasks(synchronous)


def test_options_the_stream_cannot_count_are_refused(model_dir: Path, tmp_path: Path) -> None:
    result = train(
        tmp_path / "x",
        model_dir,
        "--max-steps",
        "1",
        "--async",
        "--trainer-option",
        "num_iterations=2",
    )
    assert result.code != 0
    assert "num_iterations=2" in result.output and "--async" in result.output


def test_a_trainer_without_a_stream_is_refused_with_what_to_do() -> None:
    class Sink:
        def train(self, source: Any, *, max_steps: int) -> None: ...

    assert stream_keywords(Sink(), "sink", enabled=False, max_staleness=1) == {}
    with pytest.raises(TrainerOptionError) as refused:
        stream_keywords(Sink(), "sink", enabled=True, max_staleness=1)
    assert "per-token-grpo or trl-grpo" in str(refused.value) and "--async" in str(refused.value)
    adapter = TRLGRPOAdapter("tiny", output_dir="unused")
    assert stream_keywords(adapter, "trl-grpo", enabled=True, max_staleness=3) == {
        "max_staleness": 3
    }
