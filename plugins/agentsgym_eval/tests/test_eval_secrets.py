"""Secrets given to ``agentsgym eval`` reach no file it writes and nothing it prints.

Planted in ``--env-config`` (at depth, and as a URL's userinfo) and in
``--agent-option`` (``api_key``, ``extra_body.api_key``, ``base_url`` userinfo), then
every file of the run (results, journal, run record, summary) and its output are
searched for them. Parquet is compressed, so its table is read back as text first.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from agentsgym import hookimpl
from agentsgym.redaction import REDACTED
from agentsgym.testing import CliResult, register_env, run_cli
from agentsgym_classical import GuessTheNumberConfig, GuessTheNumberEnv

ENV_ID = "test/GameMaster-v0"
PLANTED = [f"sk-planted-{n}" for n in range(6)]


class GameMasterConfig(GuessTheNumberConfig):
    """A config with nested options and a service URL, as envs that call a model have."""

    gamemaster_options: dict[str, Any] = Field(default_factory=dict)
    service_url: str = ""
    unreachable: bool = False


class GameMasterEnv(GuessTheNumberEnv):
    """GuessTheNumber whose episodes fail quoting the service URL when ``unreachable``."""

    config_class = GameMasterConfig
    config: GameMasterConfig

    @hookimpl
    def initialize_episode(self, session_id: str, task_data: dict[str, Any]) -> Any:
        if self.config.unreachable:
            # what a client library's error says: the URL, userinfo and all
            raise ConnectionError(f"cannot reach the game master at {self.config.service_url}")
        return GuessTheNumberEnv.initialize_episode(self, session_id, task_data)


def dead_port() -> int:
    """A local port nothing listens on: every request to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def written_text(folder: Path) -> dict[str, str]:
    """Every file in ``folder`` as text; a parquet as its rows in JSON."""
    texts = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        text = path.read_bytes().decode("latin-1")
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            text += json.dumps(pq.read_table(path).to_pylist(), default=str)
        texts[path.name] = text
    return texts


def assert_no_secret(result: CliResult, folder: Path) -> dict[str, str]:
    texts = written_text(folder)
    for name, text in {**texts, "stdout": result.stdout, "stderr": result.stderr}.items():
        leaked = [secret for secret in PLANTED if secret in text]
        assert not leaked, f"{name} holds {leaked}"
    return texts


def env_config_options() -> list[str]:
    options = {"model": "judge", "extra": [{"api_key": PLANTED[0]}], "headers": {"x": 1}}
    return [
        "--env-config",
        f"gamemaster_options={json.dumps(options)}",
        "--env-config",
        f"service_url=https://user:{PLANTED[1]}@gm.example.invalid/v1",
    ]


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_secrets_in_options_reach_no_file_eval_writes(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"results{suffix}"
    with register_env(ENV_ID, GameMasterEnv):
        result = run_cli(
            "-v",
            "eval",
            ENV_ID,
            "--num-tasks",
            "2",
            "-k",
            "2",
            "--out",
            str(out),
            *env_config_options(),
            "--agent",
            "openai",
            "--agent-option",
            f"base_url=http://{PLANTED[2]}@127.0.0.1:{dead_port()}/v1",
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
    texts = assert_no_secret(result, tmp_path)
    summary = out.with_name("results.summary.json")
    assert {out.name, summary.name, f"{out.name}.run.json"} <= set(texts), result.output
    # every trial failed (nothing listens): the summary still counts them, as wrong
    report = json.loads(summary.read_text())
    assert report["num_failed"] == 4 and report["accuracy"] == 0.0
    record = json.loads(Path(f"{out}.run.json").read_text())
    options = record["arguments"]["env_config"]["gamemaster_options"]
    assert options == {"model": "judge", "extra": [{"api_key": REDACTED}], "headers": {"x": 1}}


def test_an_error_quoting_a_secret_is_kept_redacted(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    with register_env(ENV_ID, GameMasterEnv):
        result = run_cli(
            "eval",
            ENV_ID,
            "--num-tasks",
            "2",
            "--out",
            str(out),
            *env_config_options(),
            "--env-config",
            "unreachable=true",
            "--agent",
            "agentsgym/bisect",
            "--max-failure-rate",
            "1",
        )
    assert_no_secret(result, tmp_path)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["error"] for row in rows] == [
        f"ConnectionError: cannot reach the game master at https://{REDACTED}@gm.example.invalid/v1"
    ] * 2
    assert "cannot reach the game master" in result.stdout  # the failure report still says why
