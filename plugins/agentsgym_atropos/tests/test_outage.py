"""The producer through outages of the Atropos API server: retried with backoff for
the outage window, no group lost or pushed twice, an honest end when it lasts too long.

An outage is played by a loopback proxy in front of atroposlib's real ``run-api``
that fails requests by plan (the n-th request to a path: a dropped connection or an
HTTP error), and by a fake clock whose sleep returns at once: what happens depends on
request counts, never on wall-clock time.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from types import TracebackType
from typing import Any

import pytest

aiohttp = pytest.importorskip("aiohttp")
requests = pytest.importorskip("requests")

from aiohttp import web

import agentsgym
from agentsgym.aio import run_sync
from agentsgym_atropos.api_client import (
    RETRY_INITIAL,
    RETRY_MAX,
    AtroposError,
    AtroposOutageError,
    outage_policy,
)
from agentsgym_atropos.producer import AtroposProducer

GUESS = "agentsgym/GuessTheNumber-v0"
TINY = "agentsgym/tiny-chatml"
DROP = "drop"

pytestmark = pytest.mark.timeout(180)

Plan = Callable[[str, str, int], "str | int | None"]
"""(method, path, n) -> DROP (close the connection), an HTTP status to answer, or
None to forward the request; n counts the requests to that path from 1."""


class FlakyProxy:
    """A loopback proxy to ``target`` that fails the requests its plan names."""

    def __init__(self, target: str, plan: Plan) -> None:
        self.target = target
        self.plan = plan
        self.seen: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        self.forwarded: Counter[str] = Counter()
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._upstream: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> FlakyProxy:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        self._upstream = aiohttp.ClientSession()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._upstream is not None and self._runner is not None
        await self._upstream.close()
        await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        assert self._upstream is not None
        body = await request.read()
        self.seen[request.path] += 1
        fate = self.plan(request.method, request.path, self.seen[request.path])
        if fate is not None:
            self.failed[request.path] += 1
            if fate == DROP:  # the server went away mid-request: no answer at all
                assert request.transport is not None
                request.transport.close()
            return web.Response(status=int(fate) if fate != DROP else 500, text="outage")
        self.forwarded[request.path] += 1
        headers = {"Content-Type": request.headers.get("Content-Type", "application/json")}
        async with self._upstream.request(
            request.method, self.target + request.path_qs, data=body, headers=headers
        ) as answer:
            return web.Response(
                status=answer.status,
                body=await answer.read(),
                headers={"Content-Type": answer.headers.get("Content-Type", "application/json")},
            )


class FakeTime:
    """A monotonic clock that only the producer's retry sleeps move."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)  # still a suspension point, as a real sleep is


def env() -> Any:
    return agentsgym.make(GUESS, tokenizer=TINY, env_config={"high": 40})


def produce_through(
    api: str, plan: Plan, fake: FakeTime, **options: Any
) -> tuple[FlakyProxy, AtroposProducer, AtroposError | None]:
    """A producer of GuessTheNumber (bisection, groups of 4) run against ``api``
    through a proxy following ``plan``: the proxy, the producer and what it raised."""

    async def main() -> tuple[FlakyProxy, AtroposProducer, AtroposError | None]:
        async with FlakyProxy(api, plan) as proxy:
            made = AtroposProducer(
                env(),
                agentsgym.make_agent("agentsgym/bisect"),
                proxy.url,
                group_size=4,
                poll_seconds=0.05,
                clock=fake.clock,
                sleep=fake.sleep,
                **options,
            )
            try:
                await made.run()
            except AtroposError as exc:
                return proxy, made, exc
        return proxy, made, None

    return run_sync(main())


def pulled_batch(api: str) -> list[dict[str, Any]] | None:
    return requests.get(api + "/batch", timeout=10).json()["batch"]  # type: ignore[no-any-return]


def test_a_blip_of_the_api_server_loses_no_group_and_pushes_none_twice(
    api: str, register_trainer: Callable[[str, int], None]
) -> None:
    register_trainer(api, 8)

    def plan(method: str, path: str, n: int) -> str | int | None:
        if path == "/scored_data" and n <= 3:  # the first three pushes fail
            return 503 if n == 2 else DROP
        if path == "/status-env" and n in (2, 3):  # and the main loop's polls
            return 502
        return None

    fake = FakeTime()
    pushed: list[dict[str, Any]] = []
    proxy, blipped, error = produce_through(
        api,
        plan,
        fake,
        max_groups=2,
        max_concurrency=8,  # two groups at once
        on_group=lambda group, data: pushed.append(data),
    )
    assert error is None
    stats = blipped.stats
    assert proxy.failed == Counter({"/scored_data": 3, "/status-env": 2})
    assert stats.retries == 5 == len(fake.sleeps)
    assert all(0 < s <= RETRY_MAX for s in fake.sleeps)
    assert (stats.groups_started, stats.groups_pushed, stats.sequences_pushed) == (2, 2, 8)
    assert stats.groups_discarded == stats.groups_unfinished == stats.groups_dropped == 0
    assert stats.errors == []
    # every group reached the server once: two pushes forwarded, two groups served
    assert proxy.forwarded["/scored_data"] == 2
    batch = pulled_batch(api)
    assert batch is not None and len(batch) == 2
    served = sorted(json.dumps(g["group_overrides"], sort_keys=True) for g in batch)
    assert served == sorted(json.dumps(d["group_overrides"], sort_keys=True) for d in pushed)
    assert len(set(served)) == 2


def test_an_outage_longer_than_the_window_ends_the_producer_with_what_it_left(
    api: str, register_trainer: Callable[[str, int], None]
) -> None:
    register_trainer(api, 8)

    def plan(method: str, path: str, n: int) -> str | int | None:
        return DROP if path == "/scored_data" else None  # down for good

    fake = FakeTime()
    _, stuck, error = produce_through(
        api, plan, fake, max_groups=1, max_concurrency=4, outage_window=60
    )
    assert isinstance(error, AtroposOutageError)
    assert "beyond the outage window of 60s" in str(error)
    assert "cannot reach the Atropos API server" in str(error)
    stats = stuck.stats
    assert stats.retries == len(fake.sleeps) >= 2
    assert sum(fake.sleeps) == pytest.approx(60)  # retried right up to the window's edge
    assert fake.sleeps[0] <= RETRY_INITIAL
    # the one group was played to the end and kept until the producer gave up
    assert (stats.groups_started, stats.groups_pushed, stats.groups_discarded) == (1, 0, 1)
    assert stats.groups_unfinished == 0 and len(stats.errors) == 1
    assert pulled_batch(api) is None


def test_a_refused_push_is_not_retried(
    api: str, register_trainer: Callable[[str, int], None]
) -> None:
    """A 4xx answer will not change by sending the same group again."""
    register_trainer(api, 8)

    def plan(method: str, path: str, n: int) -> str | int | None:
        return 422 if path == "/scored_data" else None

    _, refused, error = produce_through(api, plan, FakeTime(), max_groups=1, max_concurrency=4)
    assert isinstance(error, AtroposError) and not isinstance(error, AtroposOutageError)
    assert "HTTP 422" in str(error)
    assert refused.stats.retries == 0 and refused.stats.groups_discarded == 1


def test_after_the_api_server_restarts_the_producer_registers_again(
    api: str, register_trainer: Callable[[str, int], None]
) -> None:
    """A restarted run-api has forgotten the env: it answers /status-env with HTTP 500
    while /status works. The producer registers again and goes on (issue 28: it
    retried /status-env for good)."""
    restarted: list[int] = []

    def plan(method: str, path: str, n: int) -> str | int | None:
        if path == "/status-env" and n == 3 and not restarted:
            # run-api restarts (its state is gone) and the trainer comes back
            requests.get(api + "/reset_data", timeout=10)
            register_trainer(api, 8)
            restarted.append(n)
        return None

    register_trainer(api, 8)
    fake = FakeTime()
    proxy, producer, error = produce_through(api, plan, fake, max_groups=2, max_concurrency=4)
    assert error is None and restarted == [3]
    stats = producer.stats
    assert stats.registrations == 2 and proxy.forwarded["/register-env"] == 2
    assert stats.retries == 0  # a forgotten env is not an outage to wait out
    assert (stats.groups_pushed, stats.groups_dropped, stats.groups_discarded) == (2, 0, 0)


def test_a_failing_gateway_is_waited_out_not_taken_for_a_restart(
    api: str, register_trainer: Callable[[str, int], None]
) -> None:
    """HTTP 500 from /status-env while /status fails too: the server is down, not
    restarted; the producer retries and registers once."""
    register_trainer(api, 8)

    def plan(method: str, path: str, n: int) -> str | int | None:
        if path == "/status-env" and n in (2, 3):
            return 500
        if path == "/status" and n <= 2:
            return 502
        return None

    _, producer, error = produce_through(api, plan, FakeTime(), max_groups=1, max_concurrency=4)
    assert error is None
    assert producer.stats.registrations == 1 and producer.stats.retries == 2


def test_backoff_grows_exponentially_with_jitter_and_a_ceiling() -> None:
    import random

    policy = outage_policy(300)
    rng, again = random.Random(0), random.Random(0)
    delays = [policy.delay(attempt, rng) for attempt in range(1, 13)]
    assert delays == [policy.delay(attempt, again) for attempt in range(1, 13)]  # seeded
    for attempt, delay in enumerate(delays):
        ceiling = min(RETRY_MAX, RETRY_INITIAL * 2**attempt)
        assert ceiling / 2 <= delay <= ceiling
    assert len(set(delays[-4:])) == 4  # at the ceiling, jitter still spreads them


def test_the_cli_exits_1_with_a_summary_when_the_server_stays_away(unreachable_url: str) -> None:
    """Not bad input (2): a runtime failure, after a summary of what was pushed. A key
    in the URL's userinfo is shown nowhere."""
    secret = "sk-ATROPOS-URL-SECRET"
    url = unreachable_url.replace("http://", f"http://{secret}@")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentsgym",
            "atropos",
            GUESS,
            "--api-url",
            url,
            "--group-size",
            "2",
            "--max-groups",
            "1",
            "--env-config",
            "high=10",
            "--outage-window",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    summary = " ".join(result.stdout.split())
    assert (
        "groups pushed │ 0" in summary
        and "retries (API server unreachable or failing) │ 0" in summary
    )
    assert "beyond the outage window of 0s" in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr
    assert secret not in result.stdout + result.stderr
    assert "<redacted>@127.0.0.1" in result.stdout


def test_the_cli_refuses_a_negative_outage_window_as_bad_input() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agentsgym", "atropos", GUESS, "--outage-window", "-1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2 and "--outage-window" in result.stderr


def test_the_trace_of_a_group_carries_no_secret() -> None:
    from agentsgym.agents import FunctionAgent
    from agentsgym_atropos.scored_data import to_scored_data_group

    game = agentsgym.make(GUESS, tokenizer=TINY, env_config={"low": 5, "high": 5})
    task = {"seed": 0, "api_key": "sk-TASK-SECRET", "url": "http://sk-USERINFO@host/v1"}
    group = game.run_trial([task], FunctionAgent(lambda m, s: ("[5]", s)), 2).groups[0]
    data = to_scored_data_group(group)
    assert "SECRET" not in json.dumps(data) and "USERINFO" not in json.dumps(data)
    trace = data["group_overrides"]["agentsgym"]["task_data"]
    assert trace == {"seed": 0, "api_key": "<redacted>", "url": "http://<redacted>@host/v1"}
