"""The server's agents play each rollout with its own seed: the rollouts of a task are
different games, as in process, over agentsgym/v1, OpenEnv and AgentGym's protocol.
The client sends its rollout's seed with the reset (``rollout_seed``); a client that
sends none gets the task's next rollout on the server, seeded as a local run seeds it.
The game is classical/TicTacToe-v0: x is the client's heuristic, o the server's seeded
random mover."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

import agentsgym
from agentsgym_classical.tictactoe_agents import HeuristicAgent, RandomMoveAgent
from serve_helpers import TINY, served

pytestmark = pytest.mark.timeout(180)

TTT = "classical/TicTacToe-v0"
TASKS = [{"seed": 2 * i} for i in range(6)]  # rows 0..5 of the served train split
ROLLOUTS = 4


def games_by_task(batch: Any) -> dict[int, list[str]]:
    """Each task's games, as x saw them (its messages), in rollout order (a client of
    OpenEnv or AgentGym plays x without knowing it: its episodes have no role)."""
    games: dict[int, list[str]] = defaultdict(list)
    for episode in sorted(batch.episodes, key=lambda e: (e.task_index, e.rollout_index)):
        assert episode.ok, episode.error
        if episode.role in ("x", None):
            games[episode.task_index].append(repr(episode.messages))
    return dict(games)


def local_games() -> dict[int, list[str]]:
    agents = {"x": HeuristicAgent(), "o": RandomMoveAgent()}
    return games_by_task(agentsgym.make(TTT, tokenizer=TINY).run_trial(TASKS, agents, ROLLOUTS))


def varied(games: dict[int, list[str]]) -> int:
    """How many tasks were played as more than one game."""
    return sum(len(set(task_games)) > 1 for task_games in games.values())


def test_rollouts_of_a_task_are_the_local_runs_games_over_v1() -> None:
    local = local_games()
    assert varied(local) >= len(TASKS) // 2  # in process, a task's rollouts differ
    with served(TTT, agents={"o": "classical/tictactoe-random"}) as server:
        env = agentsgym.make(server.url, tokenizer=TINY, env_config={"role": "x"})
        remote = games_by_task(env.run_trial(TASKS, HeuristicAgent(), ROLLOUTS))
    assert remote == local  # each rollout's seed reached the server's o


def test_a_client_that_sends_no_seed_gets_the_tasks_next_rollout() -> None:
    """OpenEnv's own clients and TRL send no seed: the server counts a task's episodes
    and seeds them as a local run's rollouts 0, 1, 2, 3 (in the order they start)."""
    pytest.importorskip("openenv.core")
    local = local_games()
    with served(TTT, agents={"o": "classical/tictactoe-random"}) as server:
        url = "openenv+" + server.url.replace("http://", "ws://")
        env = agentsgym.make(url, tokenizer=TINY, env_config={"rollout_seed_field": None})
        batch = env.run_trial([{"task_data": t} for t in TASKS], HeuristicAgent(), ROLLOUTS)
    remote = games_by_task(batch)
    assert {t: sorted(g) for t, g in remote.items()} == {t: sorted(g) for t, g in local.items()}


@pytest.mark.parametrize("protocol", ["openenv", "agentgym"])
def test_clients_of_the_other_protocols_send_their_rollouts_seed(protocol: str) -> None:
    if protocol == "openenv":
        pytest.importorskip("openenv.core")
    with served(TTT, agents={"o": "classical/tictactoe-random"}) as server:
        if protocol == "openenv":
            url = "openenv+" + server.url.replace("http://", "ws://")
            tasks = [{"data_idx": i} for i in range(len(TASKS))]
        else:
            url = f"agentgym+{server.url}"
            tasks = [{"data_idx": i} for i in range(len(TASKS))]
        env = agentsgym.make(url, tokenizer=TINY)
        seeded = games_by_task(env.run_trial(tasks, HeuristicAgent(), ROLLOUTS))
        # the same seeds again: the same games (the seed, not the server's count, chose)
        again = games_by_task(env.run_trial(tasks, HeuristicAgent(), ROLLOUTS))
    assert varied(seeded) >= len(TASKS) // 2
    assert again == seeded
