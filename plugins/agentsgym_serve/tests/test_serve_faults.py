"""Network faults between a remote env and its server (a TCP proxy that drops, delays,
breaks and refuses): retried where safe, applied exactly once, identical trajectories;
failures recorded on the episode within bounded time, never a hang."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import pytest

import agentsgym
from agentgym_style_server import build_app
from agentsgym.errors import EnvConfigError
from agentsgym_classical import BisectAgent
from agentsgym_serve import AgentGymEnv, BackgroundServer, RemoteEnv, RetryPolicy
from agentsgym_serve.errors import RemoteEnvError
from serve_helpers import GUESS, TINY, FaultProxy, fingerprint, served

pytestmark = pytest.mark.timeout(180)
TASKS = [{"seed": seed} for seed in range(8)]
FAST = RetryPolicy(backoff=0.01, max_backoff=0.1)


@pytest.fixture(scope="module")
def local_batch() -> Any:
    return agentsgym.make(GUESS, tokenizer=TINY).run_trial(TASKS, BisectAgent())


@pytest.fixture
def proxied() -> Iterator[tuple[Any, FaultProxy]]:
    with served(GUESS) as server, FaultProxy(server.port) as proxy:
        yield server, proxy


def remote(url: str, retry: RetryPolicy = FAST) -> RemoteEnv:
    return RemoteEnv(url, agentsgym.load_tokenizer(TINY), retry=retry)


def steps_played(batch: Any) -> int:
    return sum(len(e.steps) for g in batch.groups for e in g.episodes + g.failed)


def every(nth: int, fault: str, *paths: str) -> Any:
    counter = iter(range(10**9))

    def rule(number: int, line: str) -> str:
        if any(p in line for p in paths) and next(counter) % nth == nth - 1:
            return fault
        return "pass"

    return rule


def test_dropped_replies_are_retried_and_applied_exactly_once(
    proxied: tuple[Any, FaultProxy], local_batch: Any
) -> None:
    server, proxy = proxied
    env = remote(proxy.url)
    proxy.rule = every(3, "drop-once", "/sessions")  # creates, steps and finishes alike
    batch = env.run_trial(TASKS, BisectAgent())
    service = server.service
    assert proxy.applied("drop-once") >= 10
    assert fingerprint(batch) == fingerprint(local_batch)
    assert service.steps_applied == steps_played(batch)  # no step applied twice
    assert service.steps_replayed >= 1  # the lost replies were answered again
    assert service.table.created_total == len(TASKS)  # no create applied twice
    assert len(service.table) == 0  # nothing left open


@pytest.mark.parametrize("fault", ["502-once", "reset-once"])
def test_gateway_errors_and_resets_are_retried(
    proxied: tuple[Any, FaultProxy], local_batch: Any, fault: str
) -> None:
    server, proxy = proxied
    env = remote(proxy.url)
    proxy.rule = every(4, fault, "/step", "/finish", "/agentsgym/v1/sessions HTTP")
    batch = env.run_trial(TASKS, BisectAgent())
    assert proxy.applied(fault) >= 5
    assert fingerprint(batch) == fingerprint(local_batch)
    assert server.service.steps_applied == steps_played(batch)


def test_slow_replies_time_out_and_are_retried(
    proxied: tuple[Any, FaultProxy], local_batch: Any
) -> None:
    server, proxy = proxied
    env = remote(proxy.url, RetryPolicy(backoff=0.01, request_timeout=2.0))
    proxy.inject("pass", "pass", "delay:8", "pass", "delay:8")  # the 3rd and 5th requests
    batch = env.run_trial(TASKS, BisectAgent(), max_concurrency=1)
    assert proxy.applied("delay:8") == 2
    assert fingerprint(batch) == fingerprint(local_batch)
    assert server.service.steps_applied == steps_played(batch)


class ResumeAfter(logging.Handler):
    """Brings the proxy back once the client has logged ``retries`` retries: an outage
    measured in refused attempts, not in seconds, so no machine is too fast or slow."""

    def __init__(self, proxy: FaultProxy, retries: int) -> None:
        super().__init__(logging.INFO)
        self.proxy = proxy
        self.left = retries

    def emit(self, record: logging.LogRecord) -> None:  # called under the handler's lock
        if record.getMessage().startswith("retrying"):
            self.left -= 1
            if self.left == 0:
                self.proxy.resume()


@contextlib.contextmanager
def outage(proxy: FaultProxy, retries: int) -> Iterator[ResumeAfter]:
    """Connections to the proxy are refused until the client has retried ``retries`` times."""
    client_log = logging.getLogger("agentsgym_serve.client")
    handler = ResumeAfter(proxy, retries)
    level = client_log.level
    client_log.setLevel(logging.INFO)
    client_log.addHandler(handler)
    proxy.pause()
    try:
        yield handler
    finally:
        client_log.removeHandler(handler)
        client_log.setLevel(level)
        if handler.left > 0:
            proxy.resume()


def test_refused_connections_are_retried_until_the_server_is_back(
    proxied: tuple[Any, FaultProxy], local_batch: Any
) -> None:
    server, proxy = proxied
    env = remote(proxy.url)  # no attempt limit: the retry window (60 s) bounds the calls
    # one episode at a time: the first call alone meets all 20 refusals
    with outage(proxy, retries=20) as handler:
        batch = env.run_trial(TASKS, BisectAgent(), max_concurrency=1)
    assert handler.left == 0
    assert fingerprint(batch) == fingerprint(local_batch)
    assert server.service.table.created_total == len(TASKS)


def test_agentgym_creates_ride_out_refused_connections(proxied: tuple[Any, FaultProxy]) -> None:
    # A /create is never repeated once it may have reached the server, but a refused
    # connection never did: it is retried for the whole window like any other call.
    server, proxy = proxied
    env = agentsgym.make(f"agentgym+{proxy.url}", tokenizer=TINY)
    assert env.transport.policy.retry_window == 60.0  # the default: a server restart
    env.transport.policy = FAST
    with outage(proxy, retries=12):
        batch = env.run_trial([{"data_idx": i} for i in range(6)], BisectAgent(), max_concurrency=1)
    assert batch.final_rewards == [1.0] * 6 and not any(g.failed for g in batch.groups)
    assert server.service.table.created_total == 6


def test_a_short_retry_window_fails_the_episodes_saying_so(
    proxied: tuple[Any, FaultProxy],
) -> None:
    _, proxy = proxied
    env = agentsgym.make(proxy.url, tokenizer=TINY, env_config={"retry_window_seconds": 0.3})
    assert isinstance(env, RemoteEnv) and env.transport.policy.retry_window == 0.3
    proxy.pause()  # and never back
    batch = env.run_trial(TASKS[:3], BisectAgent())
    errors = [e.error for g in batch.groups for e in g.failed]
    assert len(errors) == 3
    assert all("its retry window of 0.3 s" in e and "retry_window_seconds" in e for e in errors)
    assert all("ClientConnectorError" in e for e in errors)


def test_the_retry_window_is_a_client_key_of_env_config(proxied: tuple[Any, FaultProxy]) -> None:
    server, _ = proxied
    config = {"retry_window_seconds": 5, "high": 50}
    env = agentsgym.make(server.url, tokenizer=TINY, env_config=config)  # the server has no
    assert env.transport.policy.retry_window == 5.0 and env.config.high == 50  # such key
    assert env.get_train_dataset()[0]["env_config"] == config  # rows keep it
    gym = agentsgym.make(f"agentgym+{server.url}", env_config={"retry_window_seconds": 0})
    assert gym.transport.policy.retry_window == 0.0
    for bad in (-1, "soon", True):
        with pytest.raises(EnvConfigError, match="retry_window_seconds"):
            agentsgym.make(server.url, env_config={"retry_window_seconds": bad})
    with pytest.raises(EnvConfigError, match="retry_window_seconds"):
        AgentGymEnv(server.url, env_config={"retry_window_seconds": -1})


def test_past_max_sessions_creates_wait_their_turn() -> None:
    with served(GUESS, max_sessions=3) as server:
        env = remote(server.url, RetryPolicy(max_attempts=60, backoff=0.02, max_backoff=0.2))
        tasks = [{"seed": seed} for seed in range(12)]
        batch = env.run_trial(tasks, BisectAgent(), max_concurrency=12)
        assert server.service.table.created_total == 12
    local = agentsgym.make(GUESS, tokenizer=TINY).run_trial(tasks, BisectAgent())
    assert fingerprint(batch) == fingerprint(local)


def test_a_server_gone_for_good_fails_episodes_in_bounded_time(
    proxied: tuple[Any, FaultProxy],
) -> None:
    _, proxy = proxied
    env = remote(proxy.url, RetryPolicy(max_attempts=3, backoff=0.01))
    proxy.pause()
    batch = env.run_trial(TASKS, BisectAgent())
    errors = [e.error for g in batch.groups for e in g.failed]
    assert len(errors) == len(TASKS)
    assert all("failed after 3 attempts" in e and "Connect" in e for e in errors)


def test_a_server_that_never_answers_times_out(proxied: tuple[Any, FaultProxy]) -> None:
    _, proxy = proxied
    env = remote(proxy.url, RetryPolicy(max_attempts=2, backoff=0.01, request_timeout=0.5))
    proxy.rule = lambda number, line: "delay:60"  # a black hole from now on
    batch = env.run_trial(TASKS[:2], BisectAgent())
    errors = [e.error for g in batch.groups for e in g.failed]
    assert len(errors) == 2 and all("after 2 attempts" in e for e in errors)
    with pytest.raises(RemoteEnvError, match="after 2 attempts"):
        remote(proxy.url, RetryPolicy(max_attempts=2, backoff=0.01, request_timeout=0.5))


def test_agentgym_steps_that_may_have_been_applied_are_never_repeated() -> None:
    app = build_app()
    with BackgroundServer(app) as server, FaultProxy(server.port) as proxy:
        wrapper = app.state.wrapper
        env = AgentGymEnv(proxy.url, retry=FAST)
        # a reset's reply lost: retried (starting a task again is the same start);
        # the 2nd step's reply lost: the step may have been applied, so not retried
        lost = {"reset": 0, "step": 0}

        def rule(number: int, line: str) -> str:
            for kind, count in lost.items():
                if f"/{kind} " in line:
                    lost[kind] = count + 1
                    if (kind, count + 1) in {("reset", 1), ("step", 2)}:
                        return "drop"
            return "pass"

        proxy.rule = rule
        batch = env.run_trial([{"data_idx": 1}], BisectAgent())  # 5 guesses when unbroken
        assert lost["reset"] == 2
        [failed] = batch.groups[0].failed
        assert "not retried: the server may have applied it" in failed.error
        assert wrapper.steps == 2  # the lost step reached the server once, and only once
        assert len(failed.steps) == 1
        assert wrapper.env == {}  # the instance was still closed
