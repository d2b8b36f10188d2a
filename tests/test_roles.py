"""Envs with several roles: per-role views and token streams, per-role rewards, an
agent per role or one for all (self-play), groups per (task, trainable role), output
rows with a role column. The game is classical/TicTacToe-v0 (agentsgym-classical)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import agentsgym
from agentsgym import ScriptedAgent
from agentsgym.output import expected_rows, rollout_rows
from agentsgym_classical.tictactoe import TicTacToeEnv
from agentsgym_classical.tictactoe_agents import HeuristicAgent, RandomMoveAgent


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return agentsgym.load_tokenizer("smollm2")


def test_each_role_has_its_own_conversation_tokens_and_outcome(tokenizer: Any) -> None:
    env = TicTacToeEnv(tokenizer)
    agents = {"x": HeuristicAgent(), "o": RandomMoveAgent(seed=3)}
    batch = env.run_trial([{"seed": 1}], agents, num_rollouts=3)
    assert [g.role for g in batch.groups] == ["x", "o"]
    for x, o in zip(batch.groups[0].episodes, batch.groups[1].episodes):
        assert x.ok and o.ok and x.session_id == o.session_id
        assert x.metrics["outcome"] == -o.metrics["outcome"]  # zero-sum
        assert x.final_reward == x.metrics["outcome"]
        # x moved first, so it acted once more than o or as often
        assert x.num_turns - o.num_turns in (0, 1)
        assert "you play X" in x.messages[0]["content"]
        assert "you play O" in o.messages[0]["content"]
        for episode in (x, o):
            assert [m["role"] for m in episode.messages[1::2]] == ["assistant"] * episode.num_turns
            episode.check()  # lengths, mask, rewards on agent tokens only
            rendered = tokenizer.apply_chat_template(episode.messages, tokenize=False)
            assert tokenizer.decode(episode.full_token_ids) == rendered


def test_one_agent_plays_every_role_in_self_play() -> None:
    env = TicTacToeEnv()
    batch = env.run_trial([{"seed": 0}], HeuristicAgent(), num_rollouts=2)
    outcomes = [e.metrics["outcome"] for e in batch.all_episodes]
    assert outcomes == [0.0, 0.0, 0.0, 0.0]  # the heuristic draws against itself


def test_batches_hold_only_trainable_roles() -> None:
    env = TicTacToeEnv(env_config={"trainable_roles": ["o"]})
    assert env.trainable_roles == ("o",) and TicTacToeEnv().trainable_roles == ("x", "o")
    batch = env.run_trial([{"seed": 0}, {"seed": 2}], HeuristicAgent())
    assert [(g.task_index, g.role) for g in batch.groups] == [(0, "o"), (1, "o")]
    assert {e.role for e in batch.episodes} == {"o"}
    with pytest.raises(
        agentsgym.errors.EnvConfigError, match="trainable_roles.*its roles are x, o"
    ):
        TicTacToeEnv(env_config={"trainable_roles": ["z"]})


class Seats(agentsgym.MultistepEnv):
    """A third party's env with roles: it declares them and nothing about training."""

    roles = (agentsgym.Role("left"), agentsgym.Role("right", trainable=False))


def test_trainable_roles_is_a_key_of_every_env_with_roles() -> None:
    assert Seats().trainable_roles == ("left",)
    chosen = Seats(env_config={"trainable_roles": ["right"]})
    assert chosen.trainable_roles == ("right",)
    assert chosen.row_env_config()["trainable_roles"] == ["right"]  # rows keep the choice
    with pytest.raises(agentsgym.errors.EnvConfigError, match="no role 'middle'"):
        Seats(env_config={"trainable_roles": ["middle"]})
    # an env without roles declares nothing, and its rows read as before the key existed
    single = agentsgym.make("agentsgym/GuessTheNumber-v0")
    assert single.trainable_roles == () and "trainable_roles" not in single.row_env_config()
    with pytest.raises(agentsgym.errors.EnvConfigError, match="none: it plays with one agent"):
        agentsgym.make("agentsgym/GuessTheNumber-v0", env_config={"trainable_roles": ["x"]})


def test_an_illegal_move_forfeits_and_a_missing_agent_is_named() -> None:
    env = TicTacToeEnv()
    batch = env.run_trial([{"seed": 0}], {"x": ScriptedAgent("[5]"), "o": ScriptedAgent("[5]")})
    x, o = batch.all_episodes
    assert (x.metrics["outcome"], o.metrics["outcome"]) == (1.0, -1.0)
    assert o.steps[-1].info == {"move": 5, "legal": False}
    with pytest.raises(agentsgym.errors.RunSettingsError, match="no agent for role 'o'.*ROLE=NAME"):
        env.run_trial([{"seed": 0}], {"x": HeuristicAgent()})


def test_output_rows_carry_the_role_and_their_trial_size() -> None:
    from agentsgym.aio import run_sync
    from agentsgym.engine import TrialJob, arun_jobs

    env = TicTacToeEnv()
    job = TrialJob(env, {"seed": 0}, 0, 0)
    episodes = run_sync(arun_jobs([job], HeuristicAgent()))[(0, 0)]
    rows = rollout_rows(job, episodes)
    assert [row["role"] for row in rows] == ["x", "o"]
    assert all(expected_rows(row) == 2 for row in rows)
    single = agentsgym.make("agentsgym/GuessTheNumber-v0")
    plain = single.run_trial([{"seed": 1}], agentsgym.make_agent("agentsgym/bisect"))
    assert "role" not in plain.to_records()[0]  # a single-agent env's rows as before


def test_a_turn_of_the_wrong_role_is_refused() -> None:
    from agentsgym.aio import run_sync
    from agentsgym.engine import HookRuntime, WorkerPool
    from agentsgym.runtime import EpisodeSession

    env = TicTacToeEnv()
    pool = WorkerPool(1)
    session = EpisodeSession(env, "s", {"seed": 0}, runtime=HookRuntime(env, pool))

    async def play() -> None:
        await session.start()
        assert session.role == "x"
        with pytest.raises(agentsgym.errors.EpisodeError, match="it is 'x''s turn"):
            await session.step(agentsgym.AgentAction("[1]"), role="o")
        outcome = await session.step(agentsgym.AgentAction("[1]"), role="x")
        assert outcome.role == "x" and session.role == "o"
        assert session.view("o").messages[-1]["content"].startswith("We play")  # o's own view
        assert session.view("x").messages[-1] == {"role": "assistant", "content": "[1]"}

    try:
        run_sync(play())
    finally:
        pool.close()


def test_the_command_line_gives_each_role_its_agent(tmp_path: Any) -> None:
    from agentsgym.testing import run_cli

    out = tmp_path / "games.jsonl"
    args = [
        "rollout",
        "classical/TicTacToe-v0",
        "--num-tasks",
        "2",
        "--num-rollouts",
        "1",
        "--out",
        str(out),
    ]
    roles = [
        "--agent",
        "x=classical/tictactoe-heuristic",
        "--agent",
        "o=classical/tictactoe-random",
    ]
    result = run_cli(*args, *roles, "--agent-option", "o.seed=7")
    assert result.code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["role"] for row in rows] == ["x", "o", "x", "o"]
    assert all(row["trial_rows"] == 2 for row in rows)
    wrong = run_cli(*args, "--overwrite", "--agent", "z=classical/tictactoe-random")
    assert wrong.code != 0 and "no env of this run has the role 'z'" in wrong.output


class OnlyXMoves(TicTacToeEnv):
    """A broken game: turn_role never gives o its turn."""

    @agentsgym.hookimpl(tryfirst=True)
    def turn_role(self, state: Any) -> str:
        return "x"


def test_check_env_names_a_role_that_never_acts() -> None:
    from agentsgym.testing import check_env, register_env

    with register_env(
        "tests/OnlyXMoves-v0", OnlyXMoves, default_agent="classical/tictactoe-random"
    ):
        report = check_env("tests/OnlyXMoves-v0", tokenizer=None, raise_on_failure=False)
    roles = next(c for c in report.checks if "own view" in c.name)
    assert roles.status == "failed" and "role 'o' never acted" in roles.detail


def test_a_policy_plays_every_role_but_its_fixed_opponents() -> None:
    from agentsgym.runtime import RolloutSource

    env = TicTacToeEnv(env_config={"trainable_roles": ["x"]})
    policy, opponent = RandomMoveAgent(seed=1), HeuristicAgent()
    batch = env.run_trial([{"seed": 0}], {None: policy, "o": opponent}, num_rollouts=4)
    assert [g.role for g in batch.groups] == ["x"]
    assert all(e.metrics["outcome"] <= 0 for e in batch.episodes)  # random never beats it
    rows = [{"env_class_path": "classical/TicTacToe-v0", "env_config": {}, "task_data": {}}]
    rows[0]["env_config"] = {"trainable_roles": ["x"]}
    source = RolloutSource(rows, tokenizer="smollm2", num_rollouts=2, opponents={"o": opponent})
    played = source.play(source.next_rows(), policy)
    assert {g.role for g in played.groups} == {"x"}  # one group per row, x's episodes only
    assert all(e.tokenized and e.role == "x" for e in played.episodes)


def test_resume_cuts_a_torn_game_and_plays_it_again(tmp_path: Any) -> None:
    from agentsgym.testing import run_cli

    out = tmp_path / "games.jsonl"
    args = ["rollout", "classical/TicTacToe-v0", "--num-tasks", "3", "--num-rollouts", "1"]
    args += ["--agent", "x=classical/tictactoe-heuristic", "--out", str(out)]
    assert run_cli(*args).code == 0
    whole = out.read_text().splitlines(keepends=True)
    out.write_text("".join(whole[:3]))  # the second game lost its o row
    resumed = run_cli(*args, "--resume")
    assert resumed.code == 0, resumed.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["task_index"], r["role"]) for r in rows] == [
        (t, role) for t in range(3) for role in ("x", "o")
    ]
