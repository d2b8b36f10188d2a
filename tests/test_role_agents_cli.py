"""The command line's agents of an env with roles beyond one env id: a role's default
agent (``Role.default_agent``), ``--dataset`` rows naming an env with roles, and
``--resume`` comparing each role's agent and options. The game is
classical/TicTacToe-v0 (agentsgym-classical), whose role ``o`` defaults to
``classical/tictactoe-random``."""

from __future__ import annotations

import json
from pathlib import Path

import agentsgym
from agentsgym import Role
from agentsgym.cli import AgentChoices
from agentsgym.output import RunArguments
from agentsgym.testing import register_env, run_cli
from agentsgym_classical.tictactoe import TicTacToeEnv

GAME = "classical/TicTacToe-v0"
RANDOM, HEURISTIC = "classical/tictactoe-random", "classical/tictactoe-heuristic"


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def recorded(out: Path) -> RunArguments:
    record = json.loads(out.with_name(out.name + ".run.json").read_text())
    return RunArguments.model_validate(record["arguments"])


def test_a_role_plays_with_its_default_agent_unless_the_env_agent_is_named() -> None:
    envs = {GAME: agentsgym.make(GAME)}
    assert AgentChoices.parse([f"x={HEURISTIC}"]).role_agents(envs) == {
        "x": HEURISTIC,
        "o": RANDOM,
    }
    assert AgentChoices.parse([f"o={HEURISTIC}"]).role_agents(envs) == {"o": HEURISTIC}
    assert AgentChoices.parse(None).role_agents(envs) == {"o": RANDOM}
    # one agent named for the env (or every env): it plays every role (self-play)
    assert AgentChoices.parse([HEURISTIC]).role_agents(envs) == {}
    assert AgentChoices.parse([f"{GAME}={HEURISTIC}"]).role_agents(envs) == {}


def test_rollout_with_one_role_agent_needs_no_opponent(tmp_path: Path) -> None:
    out = tmp_path / "games.jsonl"
    args = ["rollout", GAME, "--num-tasks", "2", "--num-rollouts", "2", "--out", str(out)]
    result = run_cli(*args, "--agent", f"x={HEURISTIC}", "--agent-option", "o.seed=5")
    assert result.code == 0, result.output
    assert recorded(out).role_agents == {"x": HEURISTIC, "o": RANDOM}
    rows = rows_of(out)
    assert [row["role"] for row in rows] == ["x", "o"] * 4
    assert all(row["final_reward"] >= 0 for row in rows if row["role"] == "x")  # never loses
    # the summary reports each role (an average over x and o would say 0.00)
    assert "per role" in result.stdout
    for role in ("x", "o"):
        mine = [row for row in rows if row["role"] == role]
        mean = sum(row["final_reward"] for row in mine) / len(mine)
        wins = sum(row["metrics"]["outcome"] > 0 for row in mine) / len(mine)
        line = next(line for line in result.stdout.splitlines() if line.startswith(f"│ {role} "))
        cells = [cell.strip() for cell in line.strip("│").split("│")]
        assert cells[:5] == [role, "4", "0", f"{mean:.3f}", f"{wins:.2f}"]
    assert not any(line.startswith("│ reward ") for line in result.stdout.splitlines())


def test_rows_of_a_dataset_give_each_role_its_agent(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    tasks = [
        {"env_class_path": GAME, "env_config": {}, "task_data": {"seed": 1}},
        {"env_class_path": "agentsgym/GuessTheNumber-v0", "env_config": {}, "task_data": {}},
        {"env_class_path": GAME, "env_config": {}, "task_data": {"seed": 2}},
    ]
    rows.write_text("".join(json.dumps(task) + "\n" for task in tasks))
    out = tmp_path / "out.jsonl"
    roles = ["--agent", f"x={RANDOM}", "--agent", f"o={HEURISTIC}", "--agent-option", "x.seed=4"]
    args = ["rollout", "--dataset", str(rows), "--num-rollouts", "2", "--out", str(out)]
    result = run_cli(*args, *roles)
    assert result.code == 0, result.output
    played = rows_of(out)
    game = [row for row in played if row["env_id"] == GAME]
    assert [row["role"] for row in game] == ["x", "o"] * 4
    assert all(row["final_reward"] >= 0 for row in game if row["role"] == "o")  # the heuristic
    guesses = [row for row in played if row["env_id"] != GAME]
    assert len(guesses) == 2 and all("role" not in row for row in guesses)  # its own agent
    assert recorded(out).role_agents == {"x": RANDOM, "o": HEURISTIC}

    alone = tmp_path / "alone.jsonl"
    alone.write_text(json.dumps(tasks[1]) + "\n")
    wrong = run_cli(
        "rollout", "--dataset", str(alone), "--agent", f"o={HEURISTIC}", "--out", str(out)
    )
    assert wrong.code == 2
    assert "no env of this run has the role 'o'" in wrong.output


def test_a_bad_role_is_reported_before_an_existing_output(tmp_path: Path) -> None:
    """Both are wrong; the role is the input to fix (the output alone would not make the
    command work), and it is found without loading a model."""
    out = tmp_path / "earlier.jsonl"
    out.write_text("")
    for command in (["rollout", GAME], ["eval", GAME]):
        wrong = run_cli(*command, "--agent", "z=agentsgym/random", "--out", str(out))
        assert wrong.code == 2, wrong.output
        said = " ".join(wrong.output.split())
        assert "no env of this run has the role 'z'" in said and "exists" not in said, said
        given = run_cli(*command, "--agent", f"o={HEURISTIC}", "--out", str(out))
        assert given.code != 0 and "exists" in " ".join(given.output.split()), given.output


def test_resume_refuses_other_role_agents_and_says_what_to_pass(tmp_path: Path) -> None:
    out = tmp_path / "games.jsonl"
    args = ["rollout", GAME, "--num-tasks", "2", "--num-rollouts", "1", "--out", str(out)]
    first = ["--agent", f"x={HEURISTIC}", "--agent-option", "o.seed=3"]
    assert run_cli(*args, *first).code == 0
    other = run_cli(*args, "--agent", f"x={HEURISTIC}", "--agent", f"o={HEURISTIC}", "--resume")
    assert other.code == 2
    assert f"role_agents: {{'x': '{HEURISTIC}', 'o': '{RANDOM}'}} then" in other.output
    assert f"(pass --agent o={RANDOM})" in other.output
    assert "(pass --agent-option o.seed=3)" in other.output
    same = run_cli(*args, *first, "--resume")
    assert same.code == 0, same.output


def test_a_role_agent_given_only_now_is_named_to_leave_out() -> None:
    before = RunArguments(num_tasks=1, num_rollouts=1, agent=HEURISTIC)
    now = before.model_copy(update={"role_agents": {"o": RANDOM}})
    assert before.differences(now) == [
        f"  - role_agents: {{}} then, {{'o': '{RANDOM}'}} now (leave out --agent o=...)"
    ]
    # an operational option of a role's agent (its server moved) is not compared
    timed = before.model_copy(update={"agent_options": {"o.timeout": 30}})
    assert before.differences(timed) == []


def test_describe_lists_the_roles_with_their_default_agents() -> None:
    text = run_cli("describe", GAME).output
    assert "roles (--agent ROLE=NAME):" in text
    assert "  x: plays X and moves first" in text
    assert f"  o: plays O; default agent {RANDOM}" in text
    item = json.loads(run_cli("describe", GAME, "--json").output)
    assert [(r["name"], r["trainable"], r["default_agent"]) for r in item["roles"]] == [
        ("x", True, None),
        ("o", True, RANDOM),
    ]
    assert (
        json.loads(run_cli("describe", "agentsgym/GuessTheNumber-v0", "--json").output)["roles"]
        == []
    )


class Misdeclared(TicTacToeEnv):
    """TicTacToe whose role o defaults to an agent nobody registers."""

    roles = (Role("x"), Role("o", default_agent="nope/agent"))


def test_a_role_default_that_is_not_registered_is_named_with_its_role(tmp_path: Path) -> None:
    with register_env("tests/Misdeclared-v0", Misdeclared, default_agent=RANDOM):
        out = str(tmp_path / "out.jsonl")
        result = run_cli("rollout", "tests/Misdeclared-v0", "--num-tasks", "1", "--out", out)
        named = run_cli("rollout", "tests/Misdeclared-v0", "--agent", f"o={RANDOM}", "--out", out)
    assert result.code == 2
    message = "the role 'o' of tests/Misdeclared-v0 defaults to the agent 'nope/agent'"
    assert message in result.output and "--agent o=AGENT" in result.output
    assert named.code == 0, named.output  # naming the role's agent needs no default


def test_describe_gives_every_installed_env_a_description_of_its_own() -> None:
    """describe shows the env class's docstring: one that only points at its module's
    says nothing to a user (TicTacToe's did)."""
    from agentsgym.cli.describe import env_description
    from agentsgym.runtime import get_registry

    for spec in get_registry().envs.values():
        docs = env_description(spec)["docs"]
        assert "module docstring" not in docs, spec.id
    text = run_cli("describe", GAME).output
    assert "Tic-tac-toe for two agents: x moves first, o second" in text
