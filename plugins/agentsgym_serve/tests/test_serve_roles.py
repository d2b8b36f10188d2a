"""An env with roles on the server (issue 31): a client plays one role of
classical/TicTacToe-v0 while the server's agents play the other, over agentsgym/v1,
OpenEnv and AgentGym's protocol. The client's episode is exactly its role's view of
the local game: the same messages, token ids, masks and rewards."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

import agentsgym
import serve_envs
from agentsgym import ScriptedAgent
from agentsgym.errors import RunSettingsError
from agentsgym.testing import run_cli
from agentsgym_classical.tictactoe_agents import HeuristicAgent, RandomMoveAgent
from agentsgym_classical.tictactoe_board import free_cells, read_board
from agentsgym_serve import create_app
from agentsgym_serve.errors import RemoteEnvError
from serve_helpers import GUESS, TINY, served
from test_serve_cli import first_line

# a hang guard only: a server started on a loaded machine may take minutes
pytestmark = pytest.mark.timeout(600)

TTT = "classical/TicTacToe-v0"
TASKS = [{"seed": 2 * i} for i in range(6)]
V1 = "/agentsgym/v1"


def view(episode: Any) -> dict[str, Any]:
    """What a role's model saw and is trained on: messages, token ids, masks, rewards."""
    return {
        "messages": episode.messages,
        "ids": [s.token_ids.tolist() for s in episode.segments],
        "mask": [s.agent_mask.tolist() for s in episode.segments],
        "token_rewards": [r.tolist() for r in episode.segment_rewards],
        "step_rewards": [s.reward for s in episode.steps],
        "terms": [s.reward_terms for s in episode.steps],
        "final": episode.final_reward,
        "ok": episode.ok,
    }


def local_views(role: str, agents: dict[str, Any]) -> list[dict[str, Any]]:
    batch = agentsgym.make(TTT, tokenizer=TINY).run_trial(TASKS, agents)
    return [view(e) for g in batch.groups for e in g.episodes if e.role == role]


def remote_views(batch: Any) -> list[dict[str, Any]]:
    return [view(e) for g in batch.groups for e in g.episodes]


def test_a_role_env_without_agents_for_the_other_roles_is_refused_at_startup() -> None:
    with pytest.raises(RunSettingsError, match="--agent o=AGENT") as refused:
        create_app(TTT)  # from Python, only the agents given: no role defaults
    assert "--agent AGENT for every role" in str(refused.value)
    with pytest.raises(RunSettingsError, match="no role 'z'"):
        create_app(TTT, agents={"z": RandomMoveAgent()})
    with pytest.raises(RunSettingsError, match="has no roles"):
        create_app(GUESS, agents={None: RandomMoveAgent()})
    with pytest.raises(RunSettingsError, match="--client-role o: .* no agent for x; play x"):
        create_app(TTT, agents={"o": RandomMoveAgent()}, client_role="o")
    cli = run_cli("serve", "serve_envs:Duet", "--allow-class-paths", "--port", "0")
    assert cli.code == 2 and "--agent b=AGENT" in cli.stderr
    assert "Traceback" not in cli.output
    no_roles = run_cli("serve", GUESS, "--agent", "o=classical/tictactoe-random")
    assert no_roles.code == 2 and "has no roles" in no_roles.stderr


def test_on_the_command_line_a_role_plays_with_its_default_agent() -> None:
    # what `agentsgym serve classical/TicTacToe-v0` builds: o is classical/tictactoe-random
    app = create_app(TTT, role_default_agents=True)
    info = app.state.env_info()
    assert info["role_agents"] == {"o": "classical/tictactoe-random"}
    assert info["client_roles"] == ["x"]
    every = create_app(
        TTT, {}, agents={None: "classical/tictactoe-heuristic"}, role_default_agents=True
    )
    assert every.state.env_info()["role_agents"] == dict.fromkeys(
        ("x", "o"), "classical/tictactoe-heuristic"
    )
    for served_app in (app, every):
        served_app.state.service.host.close()


def test_a_client_plays_x_over_v1_exactly_as_x_sees_the_local_game() -> None:
    with served(TTT, agents={"o": "classical/tictactoe-random"}) as server:
        env = agentsgym.make(server.url, tokenizer=TINY, env_config={"role": "x"})
        assert env.server_info["client_roles"] == ["x"]
        assert env.server_info["role_agents"] == {"o": "classical/tictactoe-random"}
        remote = env.run_trial(TASKS, HeuristicAgent())
        rows = env.make_dataset(TASKS[:1])
        assert len(server.service.table) == 0  # every session finished and closed
    local = local_views("x", {"x": HeuristicAgent(), "o": RandomMoveAgent()})
    assert remote_views(remote) == local
    assert all(v["ok"] and v["terms"][-1].get("outcome") is not None for v in local)
    episode = remote.groups[0].episodes[0]
    assert episode.env_id == TTT and "you play X" in episode.messages[0]["content"]
    # the client's env plays one role: x's episodes, with the game's outcome as locally
    assert env.role_names == ("x",) and {g.role for g in remote.groups} == {"x"}
    local_x = agentsgym.make(TTT).run_trial(TASKS, {"x": HeuristicAgent(), "o": RandomMoveAgent()})
    outcomes = [e.metrics["outcome"] for e in local_x.episodes if e.role == "x"]
    assert [e.metrics["outcome"] for e in remote.episodes] == outcomes
    assert not any("you play O" in m["content"] for m in episode.messages)
    assert rows[0]["env_config"] == {"role": "x"}  # the row plays the same seat again


def test_a_client_playing_o_sees_the_servers_first_move() -> None:
    with served(TTT, agents={None: "classical/tictactoe-heuristic"}) as server:
        env = agentsgym.make(server.url, tokenizer=TINY, env_config={"role": "o"})
        assert env.server_info["client_roles"] == ["x", "o"]
        remote = env.run_trial(TASKS, HeuristicAgent())
    # (a client's agent is told its own step count: context.step counts o's actions)
    local = local_views("o", {"x": HeuristicAgent(), "o": HeuristicAgent()})
    assert remote_views(remote) == local
    first = remote.groups[0].episodes[0].messages[0]["content"]
    assert "you play O" in first and "X played [" in first


def test_roles_a_client_cannot_play_are_refused_saying_which_it_can() -> None:
    with served(TTT, agents={"o": RandomMoveAgent()}) as server:
        with pytest.raises(RemoteEnvError, match="roles a client may play there: x"):
            agentsgym.make(server.url, env_config={"role": "o"})
        for role, says in (("o", "no agent for x; play x"), ("z", "has no role 'z'")):
            reply = httpx.post(f"{server.url}{V1}/sessions", json={"task_data": {}, "role": role})
            assert reply.status_code == 400, reply.text
            assert reply.json()["error"] == "bad_role" and says in reply.json()["detail"]
        assert len(server.service.table) == 0  # a refused create leaves no session
    with served(GUESS) as server:
        reply = httpx.post(f"{server.url}{V1}/sessions", json={"role": "x"})
        assert reply.status_code == 400 and "has no roles" in reply.json()["detail"]


def test_an_error_echoes_a_huge_role_or_key_only_in_part() -> None:
    """A 100 kB role name (or env_config key) is refused in an error of a few kB that
    says how much of it was left out, over each protocol's body checks."""
    huge = "r" * 100_000
    with served(TTT, agents={"o": RandomMoveAgent()}) as server:
        bodies = [
            (f"{V1}/sessions", {"role": huge}, 422),  # the schema's own length check
            (f"{V1}/sessions", {"role": "x", "env_config": {huge: 1}}, 422),  # the env's
            ("/reset", {"role": huge}, 422),  # OpenEnv's reset
        ]
        for path, body, status in bodies:
            reply = httpx.post(f"{server.url}{path}", json=body, timeout=60)
            assert reply.status_code == status, reply.text[:300]
            assert len(reply.content) < 5_000, (path, len(reply.content))
            assert "characters left out" in reply.text


def test_v1_sessions_count_and_show_only_the_clients_role() -> None:
    with served(TTT, agents={"o": "classical/tictactoe-heuristic"}) as server:
        created = httpx.post(f"{server.url}{V1}/sessions", json={"task_data": {"seed": 0}})
        session = created.json()
        assert session["role"] == "x" and len(session["messages"]) == 1
        base = f"{server.url}{V1}/sessions/{session['id']}"
        step = {"token": session["token"], "episode": 1, "step": 0, "action": "[1]"}
        reply = httpx.post(f"{base}/step", json=step).json()
        assert (reply["step"], reply["done"], reply["reward"]) == (0, False, 0.0)
        [prompt] = reply["messages"]  # x's next prompt, with o's move in it
        assert prompt["role"] == "user" and prompt["content"].startswith("O played [5].")
        state = httpx.get(base, params={"token": session["token"]}).json()
        assert (state["step"], state["role"], len(state["messages"])) == (1, "x", 3)
        bad = httpx.post(f"{base}/step", json={**step, "step": 1, "action": "no move"}).json()
        assert bad["done"] and bad["messages"] == []  # a forfeit ends the game
        finish = {"token": session["token"], "episode": 1}
        finished = httpx.post(f"{base}/finish", json=finish).json()
        assert finished["reward_terms"] == {"outcome": -1.0}


def test_a_failing_server_agent_fails_the_episode_naming_it() -> None:
    class Broken:
        def get_action(self, messages: Any, state: Any) -> tuple[str, Any]:
            raise RuntimeError("no move today")

    with served(TTT, agents={"o": Broken()}) as server:
        env = agentsgym.make(server.url, tokenizer=TINY)
        batch = env.run_trial(TASKS[:1], HeuristicAgent())
    [failed] = [e for g in batch.groups for e in g.failed]
    assert failed.error is not None
    assert "the server's agent of role 'o'" in failed.error and "no move today" in failed.error


def test_an_openenv_client_plays_the_servers_default_role_token_for_token() -> None:
    pytest.importorskip("openenv.core")
    with served(TTT, agents={"o": "classical/tictactoe-random"}) as server:
        url = "openenv+" + server.url.replace("http://", "ws://")
        # OpenEnvEnv's rollout seeds derive from its URL and its tasks' reset form: sent,
        # o would play other games than the local run's. Unsent, the server seeds each
        # task's first rollout as a local run does.
        env = agentsgym.make(url, tokenizer=TINY, env_config={"rollout_seed_field": None})
        remote = env.run_trial([{"task_data": t} for t in TASKS], HeuristicAgent())
    local = local_views("x", {"x": HeuristicAgent(), "o": RandomMoveAgent()})
    for got, want in zip(remote_views(remote), local, strict=True):
        # OpenEnv has no reward terms: the outcome is the last step's reward
        for key in ("messages", "ids", "mask", "token_rewards", "final"):
            assert got[key] == want[key], key
        assert sum(got["step_rewards"]) == want["final"]
    with served(TTT, agents={None: "classical/tictactoe-heuristic"}) as server:
        url = "openenv+" + server.url.replace("http://", "ws://")
        as_o = agentsgym.make(url, tokenizer=TINY, env_config={"reset_fields": {"role": "o"}})
        [played] = as_o.run_trial(TASKS[:1], HeuristicAgent()).groups[0].episodes
    assert played.ok and "you play O" in played.messages[0]["content"]
    assert played.final_reward == 0.0  # heuristic against heuristic: a draw


def test_an_agentgym_client_plays_the_client_role_the_server_was_given() -> None:
    with served(TTT, agents={"x": "classical/tictactoe-heuristic"}, client_role="o") as server:
        created = httpx.post(f"{server.url}/create").json()
        assert "you play O" in created["observation"] and "X played [5]" in created["observation"]
        reply, observation = created, created["observation"]
        while not reply["done"]:
            board = read_board(observation)
            assert board is not None
            reply = httpx.post(
                f"{server.url}/step",
                json={"id": created["id"], "action": f"[{free_cells(board)[0]}]"},
            ).json()
            observation = reply["observation"]
            assert "you play X" not in observation
        assert reply["reward"] == reply["score"] == -1.0  # the heuristic beats first-free-cell


def test_rollout_against_a_served_tictactoe_plays_one_seat(tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    with served(TTT, agents={"o": "classical/tictactoe-random"}) as server:
        played = run_cli(
            "rollout",
            server.url,
            "--env-config",
            "role=x",
            "--num-tasks",
            "3",
            "--num-rollouts",
            "1",
            "--out",
            str(out),
        )
    assert played.code == 0, played.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3 and all(r["env_id"] == TTT for r in rows)
    assert all(r["final_reward"] == 1.0 for r in rows)  # the heuristic beats random moves
    # the rows say which role they are, as a local run's do
    assert all((r["role"], r["trial_rows"], r["metrics"]["outcome"]) == ("x", 1, 1.0) for r in rows)
    seen = [json.dumps(r["messages"]) for r in rows]
    assert all("you play X" in text and "you play O" not in text for text in seen)


def test_the_servers_step_limit_counts_every_roles_actions() -> None:
    """max_steps_per_episode=3 on the server: a, b, a. The client (a) has acted twice
    when the game is cut; its episode ends there, truncated as a local run's is, instead
    of failing: the server's verdict, not worked out again by the client."""
    options = {"allow_class_paths": True, "agents": {"b": ScriptedAgent("b's line")}}
    with served("serve_envs:Duet", {"max_steps_per_episode": 3}, **options) as server:
        env = agentsgym.make(server.url, tokenizer=TINY)
        [episode] = env.run_trial([{"turns": 10}], ScriptedAgent("a's line")).groups[0].episodes
    assert episode.ok and len(episode.steps) == 2
    assert episode.truncated and not episode.steps[-1].done
    assert "truncated" not in episode.steps[-1].info  # on the episode, not in the info
    local = serve_envs.Duet(env_config={"max_steps_per_episode": 3})
    agents = {"a": ScriptedAgent("a's line"), "b": ScriptedAgent("b's line")}
    [mine, _] = local.run_trial([{"turns": 10}], agents).all_episodes
    assert (mine.truncated, len(mine.steps), mine.steps[-1].done) == (True, 2, False)
    assert [m["content"] for m in episode.messages if m["role"] == "user"] == ["a: your line"] * 2


def test_the_serve_command_says_which_roles_clients_play_and_serves_them() -> None:
    command = [sys.executable, "-m", "agentsgym", "serve", TTT, "--port", "0"]
    process = subprocess.Popen(
        [*command, "--agent", "o=classical/tictactoe-heuristic", "--no-access-log"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        url = first_line(process).split(" on ", 1)[1].split(" ", 1)[0]
        roles = first_line(process)
        assert roles.startswith("clients play x (by default x)")
        assert "o=classical/tictactoe-heuristic" in roles
        env = agentsgym.make(url, tokenizer=TINY)
        [episode] = env.run_trial(TASKS[:1], HeuristicAgent()).groups[0].episodes
        env.close()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        assert process.stdout is not None
        process.stdout.close()
    assert episode.ok and episode.final_reward == 0.0  # heuristic against heuristic
