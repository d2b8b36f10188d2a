"""Connections are closed on every path (issue 21.8): runs against a dead server, a
loop ended by ``asyncio.run``, envs dropped without ``close()``, the process exiting.
An unclosed aiohttp session is reported as "Unclosed client session" (an asyncio
error log) and an unclosed socket as a ResourceWarning; neither may appear."""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import agentsgym
from agentsgym_classical import BisectAgent
from agentsgym_serve import AgentGymEnv, RemoteEnv, RetryPolicy
from agentsgym_serve.errors import RemoteEnvError
from serve_helpers import GUESS, TINY, served

pytestmark = pytest.mark.timeout(180)
QUICK = RetryPolicy(max_attempts=2, backoff=0.01)


def dead_url() -> str:
    """A loopback URL nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def leaks(caplog: pytest.LogCaptureFixture) -> Iterator[Callable[[], list[str]]]:
    """``leaks()``: what was reported unclosed so far (after a full collection)."""
    gc.collect()  # what earlier tests left behind is theirs, not this test's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        caplog.set_level(logging.ERROR, logger="asyncio")

        def found() -> list[str]:
            gc.collect()
            reported = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
            return reported + [
                r.getMessage() for r in caplog.records if "nclosed" in r.getMessage()
            ]

        yield found


def test_episodes_against_a_dead_server_leave_nothing_open(leaks: Any) -> None:
    url = dead_url()
    env = AgentGymEnv(url, retry=QUICK)
    assert env.run_trial([{"data_idx": 1}], BisectAgent()).groups[0].failed  # the runner's loop
    batch = asyncio.run(env.arun_trial([{"data_idx": 2}], BisectAgent()))  # a loop of its own
    assert batch.groups[0].failed
    with pytest.raises(RemoteEnvError, match="failed after 2 attempts"):
        RemoteEnv(url, retry=QUICK)  # a constructor that fails
    del env, batch
    assert leaks() == []


def test_an_env_whose_server_died_leaves_nothing_open(leaks: Any) -> None:
    with served(GUESS) as server:
        env = agentsgym.make(server.url, tokenizer=TINY)
        env.transport.policy = QUICK
        assert env.run_trial([{"seed": 1}], BisectAgent()).final_rewards == [1.0]
    failed = env.run_trial([{"seed": 2}], BisectAgent()).groups[0].failed
    assert failed and "after 2 attempts" in failed[0].error
    del env
    assert leaks() == []


def test_the_pool_of_a_loop_asyncio_run_ends_is_closed_with_it(leaks: Any) -> None:
    with served(GUESS) as server:
        env = agentsgym.make(server.url, tokenizer=TINY)
        for seed in (1, 2):  # a new loop each time, and no aclose()
            batch = asyncio.run(env.arun_trial([{"seed": seed}], BisectAgent()))
            assert batch.final_rewards == [1.0]
            assert len(env.transport._sessions) == 0  # closed on its loop, as it ended
        assert env.run_trial([{"seed": 3}], BisectAgent()).final_rewards == [1.0]
        assert len(env.transport._sessions) == 1  # the runner's loop lives on
        env.close()
        assert len(env.transport._sessions) == 0
        assert leaks() == []


def test_aclose_closes_this_loops_pool_and_a_later_call_opens_a_new_one(leaks: Any) -> None:
    with served(GUESS) as server:
        env = agentsgym.make(server.url, tokenizer=TINY)

        async def main(env: Any) -> None:
            first = await env.arun_trial([{"seed": 1}], BisectAgent())
            await env.aclose()
            assert len(env.transport._sessions) == 0
            second = await env.arun_trial([{"seed": 1}], BisectAgent())
            assert first.final_rewards == second.final_rewards == [1.0]
            await env.aclose()

        asyncio.run(main(env))
        del env
    assert leaks() == []


SCRIPT = """
import asyncio, socket
import agentsgym
from agentsgym_classical import BisectAgent
from agentsgym_serve import AgentGymEnv, BackgroundServer, RetryPolicy, create_app

quick = RetryPolicy(max_attempts=2, backoff=0.01)
with socket.socket() as sock:
    sock.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
gone = AgentGymEnv(dead, retry=quick)
assert gone.run_trial([{"data_idx": 1}], BisectAgent()).groups[0].failed
assert asyncio.run(gone.arun_trial([{"data_idx": 1}], BisectAgent())).groups[0].failed
with BackgroundServer(create_app("agentsgym/GuessTheNumber-v0")) as server:
    live = agentsgym.make(server.url, tokenizer="agentsgym/tiny-chatml")
    assert live.run_trial([{"seed": 1}], BisectAgent()).final_rewards == [1.0]
    assert asyncio.run(live.arun_trial([{"seed": 2}], BisectAgent())).final_rewards == [1.0]
    rows = live.get_train_dataset()  # the blocking client's connection, kept alive
print("done")  # both envs are still alive: the process exits with them
"""


def test_a_process_that_exits_without_closing_reports_nothing_unclosed() -> None:
    run = subprocess.run(
        [sys.executable, "-X", "dev", "-W", "always::ResourceWarning", "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "done"
    assert "nclosed" not in run.stderr and "ResourceWarning" not in run.stderr, textwrap.shorten(
        run.stderr, 3000
    )
