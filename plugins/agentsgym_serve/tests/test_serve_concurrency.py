"""256 sessions at once, driven to completion: no id reused, no reply crossed between
sessions, nothing lost. Once through RemoteEnv (each trajectory identical to its local
twin), once as 256 raw AgentGym clients each checking every reply against its own task."""

from __future__ import annotations

import asyncio
import random
import re

import aiohttp
import pytest

import agentsgym
from agentsgym_classical import BisectAgent
from serve_helpers import GUESS, fingerprint, served

pytestmark = pytest.mark.timeout(300)
SESSIONS = 256


def test_256_concurrent_remote_episodes_match_their_local_twins() -> None:
    tasks = [{"seed": seed} for seed in range(SESSIONS)]
    with served(GUESS, max_sessions=SESSIONS) as server:
        # No tokenizer: this is about sessions (tokens are compared in test_serve_remote).
        env = agentsgym.make(server.url)
        batch = env.run_trial(tasks, BisectAgent(), max_concurrency=SESSIONS)
        table = server.service.table
        first = table.id_base
        assert (table.created_total, len(table), table.next_id) == (SESSIONS, 0, first + SESSIONS)
        # one id each, none reused
        assert sorted(table.tombstones) == list(range(first, first + SESSIONS))
        assert server.service.steps_applied == sum(
            len(e.steps) for g in batch.groups for e in g.episodes
        )
    local = agentsgym.make(GUESS).run_trial(tasks, BisectAgent())
    assert sum(len(g.episodes) for g in batch.groups) == SESSIONS  # nothing lost
    assert fingerprint(batch) == fingerprint(local)  # every reply on its own session


async def play(http: aiohttp.ClientSession, data_idx: int) -> tuple[int, int, list[int]]:
    """One AgentGym client: bisect the target of task ``data_idx``; (id, target, guesses)."""
    async with http.post("/create") as response:
        env_id = (await response.json())["id"]
    async with http.post("/reset", json={"id": env_id, "data_idx": data_idx}) as response:
        reply = await response.json()
    assert reply["observation"].startswith("I am thinking of an integer between 1 and 100")
    low, high, guesses = 1, 100, []
    while True:
        guess = (low + high) // 2
        guesses.append(guess)
        async with http.post("/step", json={"id": env_id, "action": f"[{guess}]"}) as response:
            assert response.status == 200
            reply = await response.json()
        if reply["done"]:
            assert reply["reward"] == 1.0
            break
        hint = re.match(r"(\d+) is wrong; the number is (higher|lower)", reply["observation"])
        assert hint is not None and int(hint.group(1)) == guess  # the answer to *this* guess
        low, high = (guess + 1, high) if hint.group(2) == "higher" else (low, guess - 1)
        assert len(guesses) < 10
    async with http.post("/close", json={"id": env_id}) as response:
        assert (await response.json()) == {"closed": True}
    return env_id, guesses[-1], guesses


def test_256_concurrent_agentgym_clients_each_get_their_own_replies() -> None:
    # The served train split (200 tasks): task data_idx i has the target of seed 2 i.
    tasks = [i % 200 for i in range(SESSIONS)]
    targets = [random.Random(2 * i).randint(1, 100) for i in tasks]

    async def main(url: str) -> list[tuple[int, int, list[int]]]:
        connector = aiohttp.TCPConnector(limit=SESSIONS)
        async with aiohttp.ClientSession(url, connector=connector) as http:
            return await asyncio.gather(*(play(http, i) for i in tasks))

    with served(GUESS, max_sessions=SESSIONS) as server:
        results = asyncio.run(main(server.url))
        table = server.service.table
        assert len(table) == 0 and table.created_total == SESSIONS
    ids = [env_id for env_id, _, _ in results]
    assert sorted(ids) == list(range(table.id_base, table.id_base + SESSIONS))  # 256 distinct
    assert [found for _, found, _ in results] == targets  # each found its own number
