"""``agentsgym train``: end to end on CPU with a tiny model."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from typer.testing import CliRunner

from agentsgym.cli import build_app
from agentsgym_trl.tiny_model import save_tiny_model

GUESS = "agentsgym/GuessTheNumber-v0"
SMALL = [
    "--env-config",
    "high=3",
    "--env-config",
    "max_steps_per_episode=2",
    "--num-tasks",
    "4",
    "--num-rollouts",
    "4",
    "--tasks-per-step",
    "2",
    "--max-new-tokens",
    "8",
]


# Two torch threads contending with the runner's threads on 2 cores run 10-30x slower.
pytestmark = pytest.mark.usefixtures("torch_single_thread")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: Any) -> Path:
    """A tiny model that answers GuessTheNumber in its format, so rewards differ."""
    return save_tiny_model(
        tmp_path_factory.mktemp("tiny") / "model", warm_start="guess-number", high=3
    )


def weights(path: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


def run(*args: str) -> Any:
    result = CliRunner().invoke(build_app(), list(args))
    return result


def test_train_with_trl_grpo_runs_end_to_end(model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = run(
        "train",
        GUESS,
        "--trainer",
        "trl-grpo",
        "--model",
        str(model_dir),
        "--max-steps",
        "2",
        "--output-dir",
        str(out),
        "--learning-rate",
        "1e-3",
        *SMALL,
    )
    assert result.exit_code == 0, result.output
    assert "2 steps in" in result.output and "final loss" in result.output
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [s["step"] for s in log] == [1, 2]
    assert all(math.isfinite(s["loss"]) for s in log)
    assert all(s["num_rollouts"] == 8 and s["num_failed"] == 0 for s in log)
    # the summary sums what the step log says about the groups (2 tasks per step)
    assert [s["groups"] for s in log] == [2.0, 2.0]
    with_signal = int(sum(s["groups_with_signal"] for s in log))
    assert "groups with" in result.output and f"{with_signal} of 4 (in" in result.output
    before, after = weights(model_dir), weights(out)
    assert before.keys() == after.keys()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed, "training left every weight as it was"
    from transformers import AutoTokenizer

    assert AutoTokenizer.from_pretrained(out).chat_template  # the output is a usable model folder


def test_train_per_token_grpo_with_a_tiny_model_built_on_the_fly(tmp_path: Path) -> None:
    out = tmp_path / "pt"
    result = run(
        "train",
        GUESS,
        "--trainer",
        "per-token-grpo",
        "--model",
        "tiny",
        "--max-steps",
        "1",
        "--output-dir",
        str(out),
        "--trainer-option",
        "beta=0.04",
        "--trainer-option",
        "credit_assignment=return_to_go",
        "--trainer-option",
        "gamma=0.9",
        # an untrained model never ends its turn: keep its cut replies in the loss
        "--trainer-option",
        "mask_truncated_completions=false",
        *SMALL,
    )
    assert result.exit_code == 0, result.output
    log = json.loads((out / "train_log.jsonl").read_text())
    assert math.isfinite(log["loss"]) and log["grad_norm"] >= 0
    assert log["kl"] == 0.0  # one step: the policy still is the reference
    assert (out / "model.safetensors").exists()
    # what training played is kept, and the closing output says how to look at it
    played = out / "played.jsonl"
    rows = [json.loads(line) for line in played.read_text().splitlines()]
    assert len(rows) == log["num_rollouts"] == 8
    assert {row["env_id"] for row in rows} == {GUESS}
    assert f"agentsgym view {played}" in " ".join(result.output.split())
    if importlib.util.find_spec("agentsgym_viewer") is not None:  # not a dependency here
        from agentsgym_viewer.loading import load_trajectories

        assert len(load_trajectories(played).episodes) == 8


def reply_lengths(agent_mask: list[int]) -> list[int]:
    """The lengths of the runs of 1 in an agent mask: one run per reply."""
    lengths: list[int] = []
    previous = 0
    for value in agent_mask:
        if value and not previous:
            lengths.append(0)
        if value:
            lengths[-1] += 1
        previous = value
    return lengths


def test_the_tiny_model_replies_in_16_tokens_unless_told_otherwise(tmp_path: Path) -> None:
    # The untrained model never ends its turn: at 256 tokens a reply, a tool env's
    # first step ran 17 minutes on two cores.
    out = tmp_path / "short"
    result = run(
        "train",
        GUESS,
        "--trainer",
        "per-token-grpo",
        "--model",
        "tiny",
        "--max-steps",
        "1",
        "--output-dir",
        str(out),
        "--env-config",
        "high=3",
        "--env-config",
        "max_steps_per_episode=2",
        "--num-tasks",
        "1",
        "--num-rollouts",
        "2",
        "--tasks-per-step",
        "1",
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "played.jsonl").read_text().splitlines()]
    replies = [n for row in rows for n in reply_lengths(row["agent_token_mask"])]
    assert replies and max(replies) == 16


def test_train_dataset_sink_writes_rollouts_with_the_envs_agent(tmp_path: Path) -> None:
    import datasets

    out = tmp_path / "sink"
    result = run(
        "train",
        GUESS,
        "--trainer",
        "dataset-sink",
        "--max-steps",
        "2",
        "--output-dir",
        str(out),
        "--num-tasks",
        "3",
        "--num-rollouts",
        "2",
    )
    assert result.exit_code == 0, result.output
    data = datasets.Dataset.from_parquet(str(out / "rollouts.parquet"))
    assert len(data) == 8 and set(data["final_reward"]) == {1.0}  # bisection always wins


def test_train_exits_1_when_every_episode_failed(tmp_path: Path) -> None:
    """Against an unreachable model server every episode fails: the run says why and
    exits 1, whatever the trainer makes of an empty step."""
    from agentsgym.testing import run_cli

    unreachable = [
        "--agent",
        "openai",
        "--agent-option",
        "base_url=http://127.0.0.1:9/v1",
        "--agent-option",
        "max_retries=0",
        "--agent-option",
        "model=m",
    ]
    common = [
        "train",
        GUESS,
        "--trainer",
        "dataset-sink",
        "--max-steps",
        "2",
        "--num-tasks",
        "2",
        "--num-rollouts",
        "2",
        *unreachable,
    ]
    result = run_cli(*common, "--output-dir", str(tmp_path / "a"))
    assert result.code == 1, result.output
    assert "every trial failed (8 of 8)" in result.stdout
    assert "8 x AgentError: cannot reach an OpenAI-compatible server" in result.stdout
    assert "Traceback" not in result.output


def test_train_chat_template_option(tmp_path: Path) -> None:
    out = tmp_path / "sink"
    result = run(
        "train",
        GUESS,
        "--trainer",
        "dataset-sink",
        "--max-steps",
        "1",
        "--output-dir",
        str(out),
        "--num-tasks",
        "1",
        "--num-rollouts",
        "1",
        "--chat-template",
        "training",
    )
    assert result.exit_code == 0, result.output
    assert "already prefix-preserving" in result.output  # the bundled ChatML is kept
    result = run(
        "train",
        GUESS,
        "--trainer",
        "dataset-sink",
        "--output-dir",
        str(tmp_path / "other"),
        "--chat-template",
        str(tmp_path / "nope.jinja"),
    )
    assert result.exit_code != 0 and "a template file that exists" in str(result.exception)


def test_train_explains_what_is_missing(tmp_path: Path) -> None:
    result = run("train", GUESS, "--trainer", "trl-grpo", "--output-dir", str(tmp_path))
    assert result.exit_code != 0 and "--model" in result.output
    result = run(
        "train", GUESS, "--trainer", "trl-grp", "--model", "tiny", "--output-dir", str(tmp_path)
    )
    assert result.exit_code != 0
    assert "Did you mean: trl-grpo" in str(result.exception)


COUNTING_TRAINER = """
from agentsgym import hookimpl
from agentsgym_trl import BatchTrainer


class CountingTrainer(BatchTrainer):
    \"\"\"Counts the agent tokens of every padded batch it is given.\"\"\"

    def __init__(self, output_dir=None):
        self.tokens = 0

    def consume(self, batch):
        self.tokens += sum(sum(row) for row in batch.padded_agent_token_mask)
        return {"loss": 0.0, "agent_tokens_so_far": float(self.tokens)}


@hookimpl
def register_trainers(register):
    register("counting/agent-tokens", "{module}:CountingTrainer", description="counts tokens")
"""


def test_a_trainer_from_a_plugin_runs_through_the_train_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentsgym.registry import reset_registry
    from agentsgym_scaffold import install_plugin

    site = tmp_path / "site"
    monkeypatch.syspath_prepend(str(site))
    install_plugin(site, "agentsgym-counting", "agentsgym_counting", COUNTING_TRAINER)
    reset_registry()
    listed = run("list-trainers", "--json")
    assert "counting/agent-tokens" in listed.output
    out = tmp_path / "counting"
    result = run(
        "train",
        GUESS,
        "--trainer",
        "counting/agent-tokens",
        "--max-steps",
        "3",
        "--output-dir",
        str(out),
        "--num-tasks",
        "2",
        "--num-rollouts",
        "2",
    )
    assert result.exit_code == 0, result.output
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    counts = [s["agent_tokens_so_far"] for s in log]
    assert len(counts) == 3 and counts[0] > 0 and counts == sorted(counts)
    assert all(s["num_rollouts"] == 4 for s in log)  # 2 tasks x 2 rollouts, bisect agent
    # bisection wins every game: no group had differing rewards, and the run says so
    assert [s["groups_with_signal"] for s in log] == [0.0, 0.0, 0.0]
    assert "no learning signal" in result.output and "smoke run" in result.output


SECRETS = {
    "env": "sk-ENV-SECRET-1",
    "agent": "sk-AGENT-SECRET-2",
    "url": "sk-URL-SECRET-3",
    "top": "sk-TOP-SECRET-4",
    "trainer_url": "sk-TRAINER-URL-SECRET-5",
    "hub": "sk-HUB-SECRET-6",
}
# Secrets at every depth of every option train records: inside a JSON env_config
# value, inside a JSON agent option, a URL's userinfo, a secret-named option.
PLANTED = [
    "--env-config",
    "chat_template_kwargs=" + json.dumps({"api_key": SECRETS["env"]}),
    "--agent-option",
    "extra_body=" + json.dumps({"api_key": SECRETS["agent"]}),
    "--agent-option",
    f"base_url=http://{SECRETS['url']}@127.0.0.1:9/v1",
    "--agent-option",
    f"api_key={SECRETS['top']}",
]
TRAINER_SECRETS = {
    # unused without use_vllm, but TRL pickles every field into training_args.bin
    "trl-grpo": [
        "--trainer-option",
        f"vllm_server_base_url=http://{SECRETS['trainer_url']}@127.0.0.1:9",
        "--trainer-option",
        f"hub_token={SECRETS['hub']}",
    ],
    "per-token-grpo": [],
    # the sink ignores options it has no use for (and logs their names only)
    "dataset-sink": ["--trainer-option", f"hub_token={SECRETS['hub']}"],
}


@pytest.mark.parametrize("trainer", sorted(TRAINER_SECRETS))
def test_no_secret_reaches_any_file_train_writes(
    trainer: str, model_dir: Path, tmp_path: Path
) -> None:
    """Every file under --output-dir (model, step log, checkpoints with the run's
    record, TRL's pickled arguments, the sink's rows) is searched for each secret."""
    out = tmp_path / trainer
    result = run(
        "train",
        GUESS,
        "--trainer",
        trainer,
        "--model",
        str(model_dir),
        "--max-steps",
        "1",
        "--save-steps",
        "1",
        "--output-dir",
        str(out),
        *SMALL,
        *PLANTED,
        *TRAINER_SECRETS[trainer],
    )
    assert result.exit_code == 0, result.output
    files = [path for path in out.rglob("*") if path.is_file()]
    assert any(path.name == "agentsgym_run_state.json" for path in files)
    for path in files:
        data = path.read_bytes()
        leaked = [name for name, secret in SECRETS.items() if secret.encode() in data]
        assert not leaked, f"{path.relative_to(out)} holds the {leaked} secret(s)"
    assert not [name for name, secret in SECRETS.items() if secret in result.output]
    state = json.loads(next(p for p in files if p.name == "agentsgym_run_state.json").read_text())
    # what the record keeps instead: the structure, with the secrets redacted
    assert state["arguments"]["env_config"]["chat_template_kwargs"] == {"api_key": "<redacted>"}
    assert state["arguments"]["agent_options"] == {"extra_body": {"api_key": "<redacted>"}}
