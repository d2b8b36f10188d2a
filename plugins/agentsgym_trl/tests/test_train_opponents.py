"""``agentsgym train --agent ROLE=NAME``: a role of an env with roles played by an agent
of its own (a scripted opponent) is not trained; the model plays and trains the others.
The choice is checked before training and kept in the checkpoints (issue 31)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")

from agentsgym.testing import run_cli

GAME = ["train", "classical/TicTacToe-v0", "--model", "tiny", "--max-steps", "1"]
SMALL = ["--num-tasks", "2", "--num-rollouts", "2", "--tasks-per-step", "2"]
# first digit of a reply is its move: the tiny model plays some moves, so o gets turns
SHORT = ["--max-new-tokens", "4", "--env-config", "strict_moves=false"]
RANDOM_O = ["--agent", "o=classical/tictactoe-random", "--agent-option", "o.seed=3"]

pytestmark = pytest.mark.usefixtures("torch_single_thread")


def played(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "played.jsonl").read_text().splitlines()]


def groups_trained(output: str) -> int:
    """The groups a run's summary counts ("0 of N (in ..." on one line)."""
    line = next(line for line in output.splitlines() if "groups with differing" in line)
    return int(re.search(r"of (\d+) \(in", line).group(1))  # type: ignore[union-attr]


def test_per_token_grpo_trains_x_against_a_scripted_o(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = [*GAME, *SMALL, *SHORT, "--trainer", "per-token-grpo", "--save-steps", "1"]
    result = run_cli(*args, *RANDOM_O, "--output-dir", str(out))
    assert result.code == 0, result.output
    assert groups_trained(result.output) == 2  # 2 tasks, x only (self-play trains 4)
    rows = played(out)
    x_rows = [r for r in rows if r["role"] == "x"]
    o_rows = [r for r in rows if r["role"] == "o"]
    # x is the model (its turns carry the weights' version), o the scripted agent (none)
    assert len(x_rows) == 4 and all(r["min_policy_version"] == 0 for r in x_rows)
    assert o_rows and all(r["min_policy_version"] is None for r in o_rows)
    assert all(r["step"] == 1 for r in rows)

    # the role's agent is part of the run: --resume with another one is refused
    heuristic = ["--agent", "o=classical/tictactoe-heuristic", "--agent-option", "o.seed=3"]
    other = run_cli(*args, *heuristic, "--max-steps", "2", "--resume", "--output-dir", str(out))
    assert other.code != 0
    assert "role_agents" in other.output and "classical/tictactoe-heuristic" in other.output
    # and so are its options
    reseeded = ["--agent", "o=classical/tictactoe-random", "--agent-option", "o.seed=4"]
    other = run_cli(*args, *reseeded, "--max-steps", "2", "--resume", "--output-dir", str(out))
    assert other.code != 0 and "role_agent_options" in other.output


def test_trl_grpo_trains_the_one_role_left_to_the_model(tmp_path: Path) -> None:
    """Without an opponent trl-grpo refuses two trainable roles (test_train_roles.py);
    an agent of its own for o leaves x, without --env-config trainable_roles."""
    out = tmp_path / "run"
    result = run_cli(
        *GAME, *SMALL, *SHORT, "--trainer", "trl-grpo", *RANDOM_O, "--output-dir", str(out)
    )
    assert result.code == 0, result.output
    assert groups_trained(result.output) == 2
    assert {r["role"] for r in played(out) if r["min_policy_version"] is not None} == {"x"}


@pytest.mark.parametrize(
    ("agents", "message"),
    [
        (["--agent", "q=classical/tictactoe-random"], "no env of this run has the role 'q'"),
        (
            ["--agent", "x=classical/tictactoe-random", "--agent", "o=classical/tictactoe-random"],
            "no role is left to train",
        ),
        (
            ["--agent", "o=classical/tictactoe-random", "--agent-option", "o.colour=red"],
            "has no option 'colour'",
        ),
        (["--agent", "other/Env-v0=classical/tictactoe-random"], "train plays one env"),
    ],
)
def test_a_bad_choice_of_role_agents_is_refused_before_training(
    agents: list[str], message: str, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    result = run_cli(
        *GAME, *SMALL, *SHORT, "--trainer", "per-token-grpo", *agents, "--output-dir", str(out)
    )
    assert result.code != 0 and message in result.output, result.output
    assert not (out / "played.jsonl").exists()
