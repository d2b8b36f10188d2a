"""Envs over HTTP: what a remote env costs per step, and how many steps a server serves.

Usage: python bench/bench_serve.py [--repeats N] [--turns T] [--in-process]

The env is CountdownEnv (tests/envs_for_tests.py: the agent says T, T-1, ... 1, one
turn each) played by an instant agent, so every figure is the framework's and the
network's own cost. The server is ``agentsgym serve`` in its own process (as it
would run beside a trainer), on loopback; ``--in-process`` runs it in a thread of
the benchmark instead (client and server then share one GIL).

* per-step overhead: episodes of T turns (default 50) one at a time, the same env
  in-process and through the server, without a tokenizer and with the bundled one;
  the overhead is the difference per turn. The server's CPU per step is read from
  /proc.
* throughput: 256 episodes of 20 turns at max_concurrency 64 and 256 (as many live
  sessions), steps per second through the server against the same run in-process.
* against a model: the same 256 episodes at max_concurrency 256 with an agent that
  takes 50 ms per reply (asyncio.sleep, a stand-in for a model server); the ideal
  wall time is 20 x 50 ms = 1 s, efficiency = ideal / measured.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))

import agentsgym  # noqa: E402
from envs_for_tests import CountdownEnv  # noqa: E402

ENV = "envs_for_tests:CountdownEnv"
TINY = "agentsgym/tiny-chatml"


class Counter:
    """Says the number in the last message: right every time, instantly."""

    run_inline = True

    def get_action(self, messages: Any, agent_state: Any) -> tuple[str, Any]:
        return "".join(ch for ch in messages[-1]["content"] if ch.isdigit()), agent_state


class SlowCounter:
    """Counter behind a 50 ms wait, as if a model server answered."""

    async def get_action(self, messages: Any, agent_state: Any) -> tuple[str, Any]:
        import asyncio

        await asyncio.sleep(0.05)
        return Counter().get_action(messages, agent_state)


class ServerProcess:
    """``agentsgym serve`` of CountdownEnv in its own process, on a free port."""

    def __enter__(self) -> ServerProcess:
        env = {**os.environ, "PYTHONPATH": f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentsgym",
                "serve",
                ENV,
                "--allow-class-paths",
                "--port",
                "0",
                "--max-sessions",
                "1024",
                "--no-access-log",
                "--log-level",
                "warning",
                "--threads",
                "32",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        self.url = line.split(" on ", 1)[1].split(" ", 1)[0]
        return self

    def cpu(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


class ThreadServer:
    """The same server in a thread of this process."""

    def __enter__(self) -> ThreadServer:
        from agentsgym_serve import BackgroundServer, create_app

        self.server = BackgroundServer(
            create_app(ENV, allow_class_paths=True, max_sessions=1024)
        ).start()
        self.url = self.server.url
        return self

    def cpu(self) -> float:
        return float("nan")  # shares the process with the client

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


def best(play: Any, repeats: int) -> float:
    seconds = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        batch = play()
        seconds = min(seconds, time.perf_counter() - start)
        assert not batch.failed, batch.failed[0].error
    return seconds


def per_step(server: Any, turns: int, repeats: int) -> None:
    config = {"start": turns, "max_steps_per_episode": turns}
    episodes = 8
    print(f"\nper-step overhead: {episodes} episodes of {turns} turns, one at a time")
    print(
        "| tokenizer | in-process, per turn | through the server, per turn | overhead per step | server CPU per step |"
    )
    print("| --- | --- | --- | --- | --- |")
    for label, tokenizer in (("none", None), ("tiny-chatml", TINY)):
        tok = agentsgym.load_tokenizer(tokenizer)
        local = CountdownEnv(tokenizer=tok, env_config=config)
        remote = agentsgym.make(server.url, tokenizer=tok, env_config=config)
        tasks = [{}] * episodes
        remote.run_trial(tasks[:1], Counter(), max_concurrency=1)  # warm up
        local_s = best(
            lambda env=local, tasks=tasks: env.run_trial(tasks, Counter(), max_concurrency=1),
            repeats,
        )
        cpu = server.cpu()
        remote_s = best(
            lambda env=remote, tasks=tasks: env.run_trial(tasks, Counter(), max_concurrency=1),
            repeats,
        )
        server_cpu = (server.cpu() - cpu) / repeats / (episodes * turns)
        steps = episodes * turns
        print(
            f"| {label} | {local_s / steps * 1e3:.3f} ms | {remote_s / steps * 1e3:.3f} ms | "
            f"{(remote_s - local_s) / steps * 1e3:.3f} ms | {server_cpu * 1e3:.3f} ms |"
        )
        remote.close()


def throughput(server: Any, repeats: int) -> None:
    turns, episodes = 20, 256
    config = {"start": turns, "max_steps_per_episode": turns}
    local = CountdownEnv(env_config=config)
    remote = agentsgym.make(server.url, env_config=config)
    tasks = [{}] * episodes
    remote.run_trial(tasks[:8], Counter())  # warm up
    print(f"\nthroughput: {episodes} episodes of {turns} turns, no tokenizer")
    print(
        "| max_concurrency (= live sessions) | in-process | through the server | server CPU per step |"
    )
    print("| --- | --- | --- | --- |")
    steps = turns * episodes
    for concurrency in (64, 256):
        local_s = best(
            lambda c=concurrency: local.run_trial(tasks, Counter(), max_concurrency=c), repeats
        )
        cpu = server.cpu()
        remote_s = best(
            lambda c=concurrency: remote.run_trial(tasks, Counter(), max_concurrency=c), repeats
        )
        server_cpu = (server.cpu() - cpu) / repeats / steps
        print(
            f"| {concurrency} | {steps / local_s:,.0f} steps/s | {steps / remote_s:,.0f} steps/s "
            f"({episodes / remote_s:,.1f} episodes/s) | {server_cpu * 1e3:.3f} ms |"
        )
    remote.close()


def against_a_model(server: Any, repeats: int) -> None:
    turns, episodes = 20, 256
    config = {"start": turns, "max_steps_per_episode": turns}
    local = CountdownEnv(env_config=config)
    remote = agentsgym.make(server.url, env_config=config)
    tasks = [{}] * episodes
    ideal = turns * 0.05
    print(f"\nagainst a 50 ms agent: {episodes} episodes of {turns} turns, max_concurrency 256")
    print("| env | wall time | efficiency (ideal 1 s) |")
    print("| --- | --- | --- |")
    for label, env in (("in-process", local), ("through the server", remote)):
        seconds = best(
            lambda env=env: env.run_trial(tasks, SlowCounter(), max_concurrency=256), repeats
        )
        print(f"| {label} | {seconds:.2f} s | {ideal / seconds:.2f} |")
    remote.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--in-process", action="store_true", help="serve from a thread")
    args = parser.parse_args()
    serving = ThreadServer() if args.in_process else ServerProcess()
    with serving as server:
        print(f"server: {server.url} ({'thread' if args.in_process else 'own process'})")
        per_step(server, args.turns, args.repeats)
        throughput(server, args.repeats)
        against_a_model(server, args.repeats)


if __name__ == "__main__":
    main()
