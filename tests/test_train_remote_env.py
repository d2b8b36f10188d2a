"""``agentsgym train URL``: the env the command line names is the user's own choice, a
server URL included, as ``agentsgym rollout URL`` plays it: its rows are played without
``AGENTSGYM_ALLOW_REMOTE_ENVS``, which guards only the URLs a dataset names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentsgym.testing import run_cli

pytest.importorskip("agentsgym_serve", reason="the server comes with agentsgym-serve")
pytest.importorskip("agentsgym_trl", reason="train comes with agentsgym-trl")

from agentsgym_serve import BackgroundServer, create_app

GUESS = "agentsgym/GuessTheNumber-v0"
SMALL = ["--num-tasks", "2", "--num-rollouts", "2", "--tasks-per-step", "2", "--max-steps", "1"]


def test_train_plays_the_server_its_command_line_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTSGYM_ALLOW_REMOTE_ENVS", raising=False)
    sink = ["--trainer", "dataset-sink", "--agent", "agentsgym/bisect", *SMALL]
    with BackgroundServer(create_app(GUESS)) as server:
        result = run_cli("train", server.url, *sink, "--output-dir", str(tmp_path / "run"))
    assert result.code == 0, result.output
    played = (tmp_path / "run" / "played.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in played]
    assert len(rows) == 4 and all(row["env_id"] == GUESS and row["error"] is None for row in rows)
