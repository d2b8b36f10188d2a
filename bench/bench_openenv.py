"""OpenEnv's protocol: `agentsgym serve` against openenv-core's own server, side by side.

Usage: python bench/bench_openenv.py [--sessions 1,64,256] [--turns 20] [--episodes E]

The env logic is CountdownEnv (tests/envs_for_tests.py: the agent says T, T-1, ...
1, one turn each). It is served twice, each server in its own process on loopback
(one uvicorn worker each, access logs off):

* ``agentsgym serve envs_for_tests:CountdownEnv`` (its OpenEnv ``/ws`` endpoint);
* openenv-core 0.3.0's ``create_app`` around an ``openenv.core.Environment`` subclass
  whose ``reset``/``step`` call the same env's hooks (``initialize_episode``,
  ``format_prompt``, ``step_episode``), with ``max_concurrent_envs`` = the sessions.

Both are driven by the same client, openenv-core's ``GenericEnvClient`` (async, one
WebSocket per session), from one process: K sessions at once, each playing episodes
of T turns (reset, then T steps whose action is read from the observation's
``text``). Reported per server and K: steps per second over the run, and the p50 and
p99 latency of a step call as the client sees it, of the median of ``--repeats``
runs (3). The two servers run one after the other, alternately, so that both see
the same machine load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
ENV = "envs_for_tests:CountdownEnv"


# ---------------------------------------------------------------------- servers
def serve_openenv_core(port: int, sessions: int, turns: int) -> None:
    """openenv-core's own server around the same env logic (run in a subprocess)."""
    sys.path.insert(0, str(TESTS))
    import uvicorn
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State

    from envs_for_tests import CountdownEnv

    shared = CountdownEnv(env_config={"start": turns, "max_steps_per_episode": turns + 5})

    class CountAction(Action):
        message: str

    class CountObservation(Observation):
        text: str = ""

    class Countdown(Environment):  # type: ignore[type-arg]
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            self.env = shared
            self.hook = shared.hook
            self._state = State(step_count=0)
            self.game: Any = None

        def reset(self, seed: int | None = None, episode_id: str | None = None, **_: Any) -> Any:
            self.game = self.hook.initialize_episode(
                env=self.env, session_id=episode_id or "s", task_data={"start": turns}
            )
            self._state = State(episode_id=episode_id, step_count=0)
            prompt = self.hook.format_prompt(env=self.env, state=self.game, step=0)
            return CountObservation(text=prompt[-1]["content"], reward=0.0)

        def step(self, action: Any, timeout_s: float | None = None, **_: Any) -> Any:
            step = self._state.step_count
            result = self.hook.step_episode(
                env=self.env, state=self.game, action=action.message, step=step, reply=None
            )
            self.game = result.state
            self._state.step_count += 1
            text = (
                ""
                if result.done
                else self.hook.format_prompt(env=self.env, state=self.game, step=step + 1)
            )
            return CountObservation(text=text, reward=result.reward, done=result.done)

        @property
        def state(self) -> State:
            return self._state

    app = create_app(Countdown, CountAction, CountObservation, max_concurrent_envs=sessions + 8)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


THREADS = int(os.environ.get("BENCH_THREADS", "32"))


def serve_agentsgym(port: int, sessions: int, turns: int) -> None:
    """`agentsgym serve` of the same env (run in a subprocess)."""
    sys.path.insert(0, str(TESTS))
    from agentsgym_serve import create_app
    from agentsgym_serve.server import bind_socket, uvicorn_server

    app = create_app(
        ENV,
        {"start": turns, "max_steps_per_episode": turns + 5},
        allow_class_paths=True,
        max_sessions=sessions + 8,
        openenv=True,
        threads=THREADS,
    )
    import logging

    logging.getLogger("agentsgym_serve.access").setLevel(logging.WARNING)
    logging.getLogger("agentsgym_serve").setLevel(logging.WARNING)
    uvicorn_server(app, log_level="warning").run(sockets=[bind_socket("127.0.0.1", port)])


SERVERS = {"agentsgym": serve_agentsgym, "openenv-core": serve_openenv_core}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(kind: str, sessions: int, turns: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT / 'bench')!r}); import bench_openenv as b; "
        f"b.SERVERS[{kind!r}]({port}, {sessions}, {turns})"
    )
    # stderr off: openenv-core logs a traceback for every client that disconnects
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env={**os.environ}, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    import httpx

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"the {kind} server did not start")


# ---------------------------------------------------------------------- client
async def drive(url: str, sessions: int, episodes: int, turns: int) -> tuple[float, list[float]]:
    """K sessions, each playing ``episodes`` episodes; (seconds, step latencies)."""
    from openenv.core import GenericEnvClient

    latencies: list[float] = []

    async def one() -> None:
        async with GenericEnvClient(base_url=url, message_timeout_s=600) as env:
            for _ in range(episodes):
                result = await env.reset(task_data={"start": turns})
                while not result.done:
                    text = result.observation["text"]
                    number = "".join(ch for ch in text if ch.isdigit())
                    began = time.perf_counter()
                    result = await env.step({"message": number})
                    latencies.append(time.perf_counter() - began)

    began = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(sessions)))
    return time.perf_counter() - began, latencies


def measure(kind: str, sessions: int, turns: int, episodes: int) -> dict[str, float]:
    proc, url = start(kind, sessions, turns)
    try:
        asyncio.run(drive(url, min(sessions, 8), 1, turns))  # warm up
        seconds, latencies = asyncio.run(drive(url, sessions, episodes, turns))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    latencies.sort()
    return {
        "steps_per_s": len(latencies) / seconds,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        "steps": len(latencies),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", default="1,64,256")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--episodes", type=int, default=0, help="per session (default: auto)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per server (median)")
    parser.add_argument(
        "--threads", type=int, default=32, help="agentsgym serve --threads (its default: 32)"
    )
    args = parser.parse_args()
    os.environ["BENCH_THREADS"] = str(args.threads)
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores)")
    print(f"{'server':<14}{'sessions':>9}{'steps/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'steps':>8}")
    for sessions in [int(s) for s in args.sessions.split(",")]:
        episodes = args.episodes or max(2, 4000 // (sessions * args.turns))
        runs: dict[str, list[dict[str, float]]] = {"openenv-core": [], "agentsgym": []}
        for _ in range(args.repeats):  # alternately, so that both see the same load
            for kind, rows in runs.items():
                rows.append(measure(kind, sessions, args.turns, episodes))
        figures = {}
        for kind, rows in runs.items():
            rows.sort(key=lambda r: r["steps_per_s"])
            figures[kind] = row = rows[len(rows) // 2]  # the median run
            spread = f"{rows[0]['steps_per_s']:.0f}-{rows[-1]['steps_per_s']:.0f}"
            print(
                f"{kind:<14}{sessions:>9}{row['steps_per_s']:>10.0f}{row['p50_ms']:>9.2f}"
                f"{row['p99_ms']:>9.2f}{row['steps']:>8.0f}   runs: {spread} steps/s",
                flush=True,
            )
        ratio = figures["agentsgym"]["steps_per_s"] / figures["openenv-core"]["steps_per_s"]
        print(f"{'':<14}{sessions:>9}  agentsgym / openenv-core steps/s = {ratio:.2f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
