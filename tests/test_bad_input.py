"""Bad input gets one readable message and exit code 2, never a traceback.

Through the command line (in process, via agentsgym.cli.main, so its error handling
is what is tested), and at the agent and env boundaries for text UTF-8 cannot hold.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import datasets
import pytest

import agentsgym
from agentsgym import AgentAction, MultistepEnv, StepResult, hookimpl
from agentsgym.agents import FunctionAgent, ScriptedAgent
from agentsgym.testing import CliResult, run_cli

GUESS = "agentsgym/GuessTheNumber-v0"


def refused(*args: str) -> CliResult:
    result = run_cli(*args)
    assert result.code == 2, result.output
    assert "Traceback" not in result.output
    return result


def rollout(tmp_path: Path, *args: str) -> CliResult:
    return refused("rollout", GUESS, "--num-tasks", "1", "--out", str(tmp_path / "r.jsonl"), *args)


# ---------------------------------------------------------------------- agents
def test_an_unknown_agent_option_lists_the_options_the_agent_takes(tmp_path: Path) -> None:
    result = rollout(tmp_path, "--agent", "scripted", "--agent-option", 'reply=["[1]"]')
    assert "agent 'scripted' has no option 'reply' (did you mean 'replies'?)" in result.stderr
    assert "It accepts: replies" in result.stderr
    result = rollout(tmp_path, "--agent-option", "nope=1")  # the env's default agent
    assert "agent 'agentsgym/bisect' has no option 'nope'. It accepts: low, high" in result.stderr
    assert not (tmp_path / "r.jsonl").exists()


def test_a_bad_agent_option_value_is_named(tmp_path: Path) -> None:
    result = rollout(tmp_path, "--agent", "scripted", "--agent-option", "replies=5")
    assert "could not build agent 'scripted' with replies=5: TypeError" in result.stderr


def test_an_unknown_agent_gets_did_you_mean(tmp_path: Path) -> None:
    for typo in ("bisect", "bisekt", "agentsgym/bisekt"):
        result = refused("eval", GUESS, "--agent", typo, "--out", str(tmp_path / "e.jsonl"))
        assert "Did you mean: agentsgym/bisect?" in result.stderr, typo


# ---------------------------------------------------------------------- env_config
@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("max_steps_per_episode", "must look like key=value"),
        ("max_steps_per_episode=abc", "max_steps_per_episode: Input should be a valid integer"),
        ("max_steps_per_episode=1.5", "max_steps_per_episode must be an integer, got 1.5"),
        ("episodes_per_trial=1e16", "episodes_per_trial must be an integer"),
        (
            "episodes_per_trial=100000",
            "episodes_per_trial: Input should be less than or equal to 1000",
        ),
        ("colour=red", "unknown key 'colour'"),
        ("low=50", "low (50) must not exceed high (40)"),
    ],
)
def test_env_config_junk(tmp_path: Path, option: str, message: str) -> None:
    extra = ["--env-config", "high=40"] if option.startswith("low") else []
    assert message in rollout(tmp_path, "--env-config", option, *extra).output


def numeric_keys() -> list[tuple[str, str, Any]]:
    """(env id, key, field) of every int or float env_config key of every installed env."""
    import types as pytypes
    import typing

    from agentsgym.registry import env_class, get_registry

    found = []
    for spec in sorted(get_registry().envs.values(), key=lambda s: s.id):
        for key, field in env_class(spec).config_class.model_fields.items():
            annotation = field.annotation
            if typing.get_origin(annotation) in (typing.Union, pytypes.UnionType):
                annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
            if annotation in (int, float):
                found.append((spec.id, key, field))
    return found


def test_every_numeric_env_config_key_has_documented_bounds() -> None:
    import annotated_types

    keys = numeric_keys()
    assert {"agentsgym/GuessTheNumber-v0", "classical/GSM8K-v0", "twentyq/TwentyQuestions-v0"} <= {
        env_id for env_id, _, _ in keys
    }
    unbounded = [
        f"{env_id} {key}"
        for env_id, key, field in keys
        if not any(isinstance(m, (annotated_types.Le, annotated_types.Lt)) for m in field.metadata)
    ]
    assert not unbounded, f"numeric env_config keys without an upper bound: {unbounded}"


@pytest.mark.parametrize(
    ("env_id", "option", "message"),
    [
        # a plugin that redeclares a common key keeps its bound (twentyq sets only ge=1)
        ("twentyq/TwentyQuestions-v0", "max_steps_per_episode=100000", "less than or equal to 10000"),
        ("classical/Arithmetic-v0", "max_steps_per_episode=100000", "less than or equal to 10000"),
        ("classical/Arithmetic-v0", "num_tasks=6333967", "num_tasks: Input should be less than"),
        ("classical/Arithmetic-v0", "num_tasks=2.0", "num_tasks must be an integer"),
        ("classical/Arithmetic-v0", "correct_reward=NaN", "correct_reward: Input should be a finite"),
        ("classical/GSM8K-v0", "dataset=" + "a" * 10_000, "longer than any path"),
        ("agentsgym/GuessTheNumber-v0", "high=1e300", "high"),
    ],
)
def test_env_config_bounds_of_every_env(tmp_path: Path, env_id: str, option: str, message: str) -> None:
    result = refused(
        "rollout", env_id, "--num-tasks", "1", "--out", str(tmp_path / "r.jsonl"),
        "--env-config", option,
    )
    assert message in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--hook-timeout", "-1"], "hook_timeout_seconds: Input should be greater than 0"),
        (
            ["--episode-timeout", "1e12"],
            "episode_timeout_seconds: Input should be less than or equal",
        ),
        (["--max-failure-rate", "2"], "--max-failure-rate"),
        (["--num-rollouts", "1000000000"], "--num-rollouts"),
        (["--resume", "--overwrite"], "contradict"),
        (["--tokenizer", "/no/such/tokenizer"], "tokenizer '/no/such/tokenizer': no such folder"),
    ],
)
def test_bad_run_options(tmp_path: Path, args: list[str], message: str) -> None:
    assert message in rollout(tmp_path, *args).output


# ---------------------------------------------------------------------- rows files
@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("rows.jsonl", b'{"env_class_path": 5}\n', "dataset row 0"),
        ("rows.jsonl", b"not json\n", "rows.jsonl:1 is not valid JSON"),
        ("rows.jsonl", b'{"env_class_path": "agentsgym/GuessTheNumber-v0"}\n', "task_data"),
        ("rows.jsonl", b"\xff\xfe\x00garbage\n", "is not UTF-8 text"),
        ("rows.jsonl", b"", "has no rows"),
        ("rows.parquet", b"PAR1 not really", "cannot read rows file"),
        ("rows.csv", b"a,b\n", "must end in .parquet or .jsonl"),
        (
            "rows.jsonl",
            b'{"env_class_path": "nope/Missing-v0", "env_config": {}, "task_data": {}}\n',
            "no env registered",
        ),
    ],
)
def test_broken_rows_files(tmp_path: Path, name: str, content: bytes, message: str) -> None:
    rows = tmp_path / name
    rows.write_bytes(content)
    result = refused(
        "rollout", "--dataset", str(rows), "--agent", "scripted", "--out", str(tmp_path / "r.jsonl")
    )
    assert message in result.stderr


def test_a_missing_rows_file(tmp_path: Path) -> None:
    result = refused(
        "rollout",
        "--dataset",
        str(tmp_path / "nope.jsonl"),
        "--agent",
        "scripted",
        "--out",
        str(tmp_path / "r.jsonl"),
    )
    assert "does not exist" in result.stderr


# ---------------------------------------------------------------------- --out
def test_outputs_that_cannot_be_written(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert (
        "is a file, not a folder"
        in refused("rollout", GUESS, "--out", str(blocker / "sub" / "r.jsonl")).stderr
    )
    folder = tmp_path / "d.jsonl"
    folder.mkdir()
    assert "is a folder" in refused("rollout", GUESS, "--out", str(folder)).stderr
    assert (
        "must end in .parquet or .jsonl"
        in refused("eval", GUESS, "--out", str(tmp_path / "x.csv")).stderr
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_output_folder(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        assert "not writable" in refused("rollout", GUESS, "--out", str(folder / "r.jsonl")).stderr
    finally:
        folder.chmod(0o755)


def test_other_commands_refuse_cleanly(tmp_path: Path) -> None:
    assert "no run writing" in refused("finish-output", str(tmp_path / "none.parquet")).stderr
    assert (
        "--split must be train or eval"
        in refused("eval", GUESS, "--split", "dev", "--out", str(tmp_path / "e.jsonl")).output
    )
    rows = tmp_path / "r.jsonl"
    rows.write_text('{"env_class_path": "%s", "task_data": {}}\n' % GUESS)
    boxed = refused(
        "rollout", "--dataset", str(rows), "--env-config", "high=5",
        "--out", str(tmp_path / "o.jsonl"),
    ).output
    # typer draws usage errors in a box that wraps lines
    assert "the rows of --dataset carry their own env_config" in " ".join(
        boxed.replace("│", " ").split()
    )


# ---------------------------------------------------------------------- surrogates
@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_reply_with_a_lone_surrogate_is_repaired_end_to_end(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"r{suffix}"
    result = run_cli(
        "rollout",
        GUESS,
        "--num-tasks",
        "1",
        "--num-rollouts",
        "1",
        "--agent",
        "scripted",
        "--agent-option",
        'replies=["\\ud800 [0]", "\\udfff\\ud83d\\ude00"]',
        "--env-config",
        "max_steps_per_episode=2",
        "--out",
        str(out),
    )
    assert result.code == 0, result.output
    row = (
        datasets.Dataset.from_parquet(str(out))
        if suffix == ".parquet"
        else datasets.Dataset.from_json(str(out))
    )[0]
    assert row["error"] is None
    replies = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
    assert replies == ["\ufffd [0]", "\ufffd\U0001f600"]
    assert [info["repaired_surrogates"] for info in row["step_infos"]] == [
        1,
        1,
    ]  # JSON joined the escaped pair itself
    tokenizer = agentsgym.load_tokenizer("agentsgym/tiny-chatml")
    assert (
        row["full_token_ids"]
        == tokenizer.apply_chat_template(row["messages"], tokenize=True)["input_ids"]
    )


class SurrogateEnv(MultistepEnv):
    """An env whose prompts hold lone surrogates (from a badly decoded dataset, say)."""

    @hookimpl
    def initialize_episode(self, session_id: str, task_data: dict[str, Any]) -> str:
        return task_data["text"].replace("?", chr(0xD800))

    @hookimpl
    def format_prompt(self, state: str, step: int) -> Any:
        return [{"role": "system", "content": "sys \udc80"}, {"role": "user", "content": state}]

    @hookimpl
    def step_episode(self, state: str, action: str) -> StepResult:
        return StepResult(state, 1.0, True, {"echo": action})


def test_env_messages_with_surrogates_are_repaired() -> None:
    env = SurrogateEnv(tokenizer=agentsgym.load_tokenizer("agentsgym/tiny-chatml"))
    batch = env.run_trial([{"text": "odd ? text"}], ScriptedAgent(["ok"]), 1)
    episode = batch.all_episodes[0]
    assert episode.error is None
    assert [m["content"] for m in episode.messages[:2]] == ["sys \ufffd", "odd \ufffd text"]
    json.dumps(batch.to_records(), ensure_ascii=False).encode("utf-8")
    batch.to_dataset()


def test_an_agent_action_without_text_fails_its_episode_only() -> None:
    env = agentsgym.make(GUESS)
    agent = FunctionAgent(lambda messages, state: (AgentAction(text=None), state))  # type: ignore[arg-type]
    batch = env.run_trial([{"seed": 1}], agent, 2)
    assert len(batch.failed) == 2
    assert "AgentAction whose text is NoneType" in (batch.failed[0].error or "")
