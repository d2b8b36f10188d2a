"""OpenEnv's protocol: `agentsgym serve` against openenv-core's own server, side by side.

Usage: python bench/bench_openenv.py [--sessions 1,64,256] [--turns 20] [--episodes E]
                                    [--repeats 3] [--baseline TREE] [--inline-hooks]

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
runs (3), and the CPU time per step of the server process (all its threads) and of
the client process over the measured part, medians of the runs. The servers run one
after the other, alternately, so that all see the same machine load. On a shared
machine the CPU per step is the steadier figure: steps per second also count the
client's and other processes' turns at the cores.

``--inline-hooks`` serves agentsgym once more with the env's hooks on the server's
event loop (``InlineCountdownEnv``: the same env setting ``run_hooks_inline``, as an
env with instant hooks does), a further server in the alternation: what the hand-off
of each turn to a worker thread costs, which both servers above pay (openenv-core
runs every ``step`` in a thread of the session's own). The headline ratio is the
plain env's.

``--baseline TREE`` serves agentsgym a second time, imported from another source tree
(a checkout of the code before a change, ``git worktree add /tmp/before main``), as a
third server in the same alternation: before and after, side by side.
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
INLINE_ENV = "envs_for_tests:InlineCountdownEnv"


# ---------------------------------------------------------------------- servers
def openenv_core_app(sessions: int, turns: int) -> Any:
    """openenv-core's own app around the same env logic."""
    sys.path.insert(0, str(TESTS))
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

    return create_app(Countdown, CountAction, CountObservation, max_concurrent_envs=sessions + 8)


def serve_openenv_core(port: int, sessions: int, turns: int) -> None:
    """openenv-core's own server (run in a subprocess), as openenv-core runs it."""
    import uvicorn

    app = openenv_core_app(sessions, turns)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


THREADS = int(os.environ.get("BENCH_THREADS", "32"))


def agentsgym_app(sessions: int, turns: int, env: str = ENV) -> Any:
    """`agentsgym serve`'s app of the same env (``env``: that env class instead)."""
    sys.path.insert(0, str(TESTS))
    import logging

    from agentsgym_serve import create_app

    app = create_app(
        env,
        {"start": turns, "max_steps_per_episode": turns + 5},
        allow_class_paths=True,
        max_sessions=sessions + 8,
        openenv=True,
        threads=THREADS,
    )
    logging.getLogger("agentsgym_serve.access").setLevel(logging.WARNING)
    logging.getLogger("agentsgym_serve").setLevel(logging.WARNING)
    return app


def serve_as_the_command_does(app: Any, port: int) -> None:
    """Serve ``app`` as `agentsgym serve` does once it has built it: the heap frozen
    (where the served tree has ``freeze_heap``; a ``--baseline`` tree may predate it),
    then uvicorn on this process's own loop."""
    from agentsgym_serve import server

    freeze_heap = getattr(server, "freeze_heap", None)
    if freeze_heap is not None:
        freeze_heap()
    server.run_server(server.uvicorn_server(app), [server.bind_socket("127.0.0.1", port)])


def serve_agentsgym(port: int, sessions: int, turns: int) -> None:
    """`agentsgym serve` of the same env (run in a subprocess), as the command runs it."""
    serve_as_the_command_does(agentsgym_app(sessions, turns), port)


def serve_agentsgym_inline(port: int, sessions: int, turns: int) -> None:
    """`agentsgym serve` of the same env, its hooks on the event loop (run_hooks_inline)."""
    serve_as_the_command_does(agentsgym_app(sessions, turns, INLINE_ENV), port)


SERVERS = {
    "agentsgym": serve_agentsgym,
    "agentsgym-inline": serve_agentsgym_inline,
    "openenv-core": serve_openenv_core,
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def source_path(tree: Path) -> str:
    """PYTHONPATH that imports agentsgym and its plugins from another source tree (a
    checkout of the code before a change): its src folders come before the installed
    ones."""
    core = tree / "core" / "src"
    if not core.is_dir():
        raise SystemExit(f"--baseline {tree}: no {core}; give the root of a checkout")
    folders = [core, *sorted((tree / "plugins").glob("*/src"))]
    return os.pathsep.join(str(f) for f in folders)


def start(
    kind: str, sessions: int, turns: int, tree: Path | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """A server process; ``tree``: agentsgym imported from that source tree."""
    port = free_port()
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT / 'bench')!r}); import bench_openenv as b; "
        f"b.SERVERS[{kind!r}]({port}, {sessions}, {turns})"
    )
    env = {**os.environ}
    if tree is not None:
        env["PYTHONPATH"] = source_path(tree)
    # stderr off: openenv-core logs a traceback for every client that disconnects
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.DEVNULL)
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


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, all threads) of a process so far (Linux: /proc); NaN
    elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def measure(
    kind: str, sessions: int, turns: int, episodes: int, tree: Path | None = None
) -> dict[str, float]:
    """One run: steps per second, step latencies, and the CPU time per step of the server
    process and of this one (the client) over the measured part."""
    proc, url = start(kind, sessions, turns, tree)
    try:
        asyncio.run(drive(url, min(sessions, 8), 1, turns))  # warm up
        server_before, client_before = cpu_seconds(proc.pid), os.times()
        seconds, latencies = asyncio.run(drive(url, sessions, episodes, turns))
        server_cpu, client_after = cpu_seconds(proc.pid) - server_before, os.times()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    client_cpu = sum(client_after[:2]) - sum(client_before[:2])
    latencies.sort()
    steps = len(latencies)
    return {
        "steps_per_s": steps / seconds,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[min(steps - 1, int(0.99 * steps))],
        "steps": steps,
        "server_us": 1e6 * server_cpu / steps,
        "client_us": 1e6 * client_cpu / steps,
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
    parser.add_argument(
        "--baseline",
        type=Path,
        help="also serve agentsgym from this source tree (a checkout of the code before a "
        "change), a third server in the same alternation",
    )
    parser.add_argument(
        "--inline-hooks",
        action="store_true",
        help="also serve the env with its hooks on the event loop (run_hooks_inline), "
        "a further server in the same alternation",
    )
    args = parser.parse_args()
    os.environ["BENCH_THREADS"] = str(args.threads)
    arms: dict[str, tuple[str, Path | None]] = {"openenv-core": ("openenv-core", None)}
    if args.baseline is not None:
        source_path(args.baseline)  # a bad tree fails now, not after the first runs
        arms["agentsgym (baseline)"] = ("agentsgym", args.baseline)
    arms["agentsgym"] = ("agentsgym", None)
    if args.inline_hooks:
        arms["agentsgym, hooks inline"] = ("agentsgym-inline", None)
    width = max(len(name) for name in arms) + 2
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    print(
        f"{'server':<{width}}{'sessions':>9}{'steps/s':>10}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'steps':>8}{'server CPU':>12}{'client CPU':>12}  (CPU: µs a step)"
    )
    for sessions in [int(s) for s in args.sessions.split(",")]:
        episodes = args.episodes or max(2, 4000 // (sessions * args.turns))
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in arms}
        for _ in range(args.repeats):  # alternately, so that all see the same load
            for name, (kind, tree) in arms.items():
                runs[name].append(measure(kind, sessions, args.turns, episodes, tree))
        figures = {}
        for name, rows in runs.items():
            server_us = statistics.median(r["server_us"] for r in rows)
            client_us = statistics.median(r["client_us"] for r in rows)
            rows.sort(key=lambda r: r["steps_per_s"])
            figures[name] = row = {**rows[len(rows) // 2], "server_us": server_us}
            spread = f"{rows[0]['steps_per_s']:.0f}-{rows[-1]['steps_per_s']:.0f}"
            print(
                f"{name:<{width}}{sessions:>9}{row['steps_per_s']:>10.0f}{row['p50_ms']:>9.2f}"
                f"{row['p99_ms']:>9.2f}{row['steps']:>8.0f}{server_us:>12.0f}{client_us:>12.0f}"
                f"   runs: {spread} steps/s",
                flush=True,
            )
        core = figures["openenv-core"]
        for name in arms:
            if name == "openenv-core":
                continue
            speed = figures[name]["steps_per_s"] / core["steps_per_s"]
            cpu = core["server_us"] / figures[name]["server_us"]
            print(
                f"{'':<{width}}{sessions:>9}  {name} / openenv-core: steps/s {speed:.2f}, "
                f"server CPU a step {cpu:.2f}x less"
            )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
