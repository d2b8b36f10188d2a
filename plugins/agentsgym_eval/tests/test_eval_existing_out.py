"""An existing ``--out`` is refused before the agent is built: a model that takes
minutes to load is not loaded only to be told the output exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentsgym.registry import reset_registry
from agentsgym.testing import run_cli
from agentsgym_scaffold import install_plugin

HEAVY_AGENT = '''
import os
from pathlib import Path

from agentsgym import hookimpl


class HeavyModel:
    """Stands for a model that takes minutes to load: building it leaves a mark."""

    def __init__(self, **options):
        Path(os.environ["HEAVY_MODEL_MARK"]).touch()

    def get_action(self, messages, agent_state):
        return "[50]", agent_state


@hookimpl
def register_agents(register):
    register("heavy/model", "{module}:HeavyModel", description="slow to build")
'''


@pytest.fixture
def heavy_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The heavy/model agent installed; returns the file its construction creates."""
    site = tmp_path / "site"
    install_plugin(site, "agentsgym-heavy", "agentsgym_heavy", HEAVY_AGENT)
    monkeypatch.syspath_prepend(str(site))
    mark = tmp_path / "model-was-loaded"
    monkeypatch.setenv("HEAVY_MODEL_MARK", str(mark))
    reset_registry()
    yield mark
    reset_registry()


@pytest.mark.parametrize(
    ("command", "existing"),
    [("eval", "r.jsonl"), ("eval", "r.summary.json"), ("rollout", "r.jsonl")],
)
def test_an_existing_out_is_refused_before_the_agent_is_built(
    tmp_path: Path, heavy_agent: Path, command: str, existing: str
) -> None:
    (tmp_path / existing).write_text("{}\n")
    out = tmp_path / "r.jsonl"
    args = [command, "agentsgym/GuessTheNumber-v0", "--agent", "heavy/model", "--num-tasks", "1"]
    refused = run_cli(*args, "--out", str(out))
    assert refused.code == 2, refused.output
    assert f"already exists ({existing})" in refused.stderr and "--overwrite" in refused.stderr
    assert not heavy_agent.exists()
    # with --overwrite the same command builds the agent and plays
    played = run_cli(*args, "--out", str(out), "--overwrite")
    assert played.code == 0, played.output
    assert heavy_agent.exists()
