"""Secrets given on the command line never reach a file a run writes, nor its output."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from agentsgym.redaction import REDACTED, is_secret, redact, redact_argv, redact_text
from agentsgym.testing import register_env, run_cli
from envs_for_tests import ConfiguredCountdownEnv

PLANTED = [f"sk-planted-{n}" for n in range(6)]


def dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_planted_secret_reaches_no_file_the_run_writes(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"run{suffix}"
    port = dead_port()
    service_options = {"nested": [{"api_key": PLANTED[0]}], "timeout": 3, "unreachable": True}
    with register_env("test/Configured-v0", ConfiguredCountdownEnv):
        result = run_cli(
            "-v",
            "rollout",
            "test/Configured-v0",
            "--num-tasks",
            "2",
            "--out",
            str(out),
            "--env-config",
            f"service_options={json.dumps(service_options)}",
            "--env-config",
            f"service_url=https://user:{PLANTED[1]}@example.invalid/v1",
            "--agent",
            "openai",
            "--agent-option",
            f"base_url=http://{PLANTED[2]}@127.0.0.1:{port}/v1",
            "--agent-option",
            f"api_key={PLANTED[3]}",
            "--agent-option",
            f'extra_body={{"api_key": "{PLANTED[4]}", "top_k": 5}}',
            "--agent-option",
            "model=m",
            "--agent-option",
            "max_retries=0",
            "--max-failure-rate",
            "1",
        )
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {out.name, f"{out.name}.run.json"}, result.output
    for text in [
        result.stdout,
        result.stderr,
        *(p.read_bytes().decode("latin-1") for p in written),
    ]:
        assert not [secret for secret in PLANTED if secret in text]
    record = json.loads(Path(f"{out}.run.json").read_text())
    assert record["arguments"]["env_config"]["service_options"]["nested"] == [{"api_key": REDACTED}]
    assert record["arguments"]["env_config"]["service_options"]["timeout"] == 3
    assert f"base_url=http://{REDACTED}@127.0.0.1:{port}/v1" in record["command_line"]
    assert "cannot reach https://<redacted>@example.invalid" in result.stdout  # the error, kept


def test_resume_accepts_a_changed_secret_and_refuses_a_changed_setting(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"

    def rollout(api_key: str, timeout: int, *extra: str) -> str:
        options = json.dumps({"api_key": api_key, "timeout": timeout})
        result = run_cli(
            "rollout",
            "test/Configured-v0",
            "--num-tasks",
            "2",
            "--out",
            str(out),
            "--agent",
            "agentsgym/bisect",
            "--env-config",
            f"service_options={options}",
            *extra,
        )
        assert result.code == (0 if timeout == 3 else 2), result.output
        return result.output

    with register_env("test/Configured-v0", ConfiguredCountdownEnv):
        rollout(PLANTED[0], 3)
        rollout(PLANTED[1], 3, "--resume")
        refused = rollout(PLANTED[1], 4, "--resume")
    assert "service_options" in refused and PLANTED[1] not in refused


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("api_key", True),
        ("OPENAI_API_KEY", True),
        ("--api-key", True),
        ("hf_token", True),
        ("password", True),
        ("Authorization", True),
        ("max_tokens", False),
        ("author", False),
        ("tokenizer", False),
        ("top_k", False),
    ],
)
def test_secret_names(key: str, secret: bool) -> None:
    assert is_secret(key) is secret


def test_redaction_of_text_data_and_command_lines() -> None:
    assert redact_text("see http://KEY@host:1/v1 and https://u:p@h/x") == (
        f"see http://{REDACTED}@host:1/v1 and https://{REDACTED}@h/x"
    )
    assert (
        redact_text("{'token': 'abc', 'max_tokens': 5}")
        == f"{{'token': '{REDACTED}', 'max_tokens': 5}}"
    )
    assert redact_text("Authorization: Bearer sk-1") == f"Authorization: {REDACTED}"
    assert redact_text("(api_key=sk-2) [token=t]") == f"(api_key={REDACTED}) [token={REDACTED}]"
    assert redact({"a": [{"hf_token": "x"}, "ftp://u@h"], "n": (1, "x")}) == {
        "a": [{"hf_token": REDACTED}, f"ftp://{REDACTED}@h"],
        "n": [1, "x"],
    }
    assert redact_argv(["--api-key", "sk-1", "--max-tokens", "5", "api_key=sk-2"]) == [
        "--api-key",
        REDACTED,
        "--max-tokens",
        "5",
        f"api_key={REDACTED}",
    ]
