"""Tools under faults: overrunning sync tools never starve later calls, a tool that
raises SystemExit or KeyboardInterrupt is answered with an error (the run goes on), and
a huge result is cut, saying so."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import agentsgym
from agentsgym_tools import ToolEnv, ToolRunner, ToolThreads, as_tools
from agentsgym_tools.calculator import CalculatorEnv, calculator_solver


def _call(tool_name: str, /, **arguments: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": tool_name, "arguments": arguments}}


def run(runner: ToolRunner, *calls: dict[str, Any]) -> list[str]:
    return [m["content"] for m in asyncio.run(runner.run(list(calls)))]


def test_overrunning_sync_tools_never_starve_later_calls() -> None:
    release = threading.Event()

    def stuck() -> str:
        """Wait until released."""
        release.wait()
        return "late"

    def ok() -> str:
        """Answer at once."""
        return "ok"

    threads = ToolThreads(max_workers=2)
    runner = ToolRunner(as_tools([stuck, ok]), timeout_seconds=0.05, threads=threads)
    try:
        overruns = run(runner, *[_call("stuck") for _ in range(6)])
        assert overruns == ["Error: stuck did not finish within 0.05 seconds"] * 6
        patient = ToolRunner(as_tools([ok]), timeout_seconds=30, threads=threads)
        assert run(patient, _call("ok"), _call("ok")) == ["ok", "ok"]  # all stuck ones run on
    finally:
        release.set()


def test_abandoned_threads_are_bounded() -> None:
    release = threading.Event()

    def stuck() -> str:
        """Wait until released."""
        release.wait()
        return "late"

    threads = ToolThreads(max_workers=1, max_abandoned=1)
    runner = ToolRunner(as_tools([stuck]), timeout_seconds=0.05, threads=threads)
    try:
        run(runner, _call("stuck"))
        run(runner, _call("stuck"))
        assert threads.abandoned == 1  # the second overrun kept its thread: none replaced it
    finally:
        release.set()


def test_system_exit_and_keyboard_interrupt_are_answered_and_the_run_goes_on() -> None:
    def leave(code: int) -> str:
        """Exit the process.

        Args:
            code: the exit status
        """
        raise SystemExit(code)

    async def interrupt() -> str:
        """Interrupt, as Ctrl-C does."""
        raise KeyboardInterrupt

    def add(a: int, b: int) -> int:
        """Add.

        Args:
            a: a
            b: b
        """
        return a + b

    runner = ToolRunner(as_tools([leave, interrupt, add]))
    answers = run(runner, _call("leave", code=3), _call("interrupt"), _call("add", a=1, b=2))
    assert answers == [
        "Error: leave raised SystemExit: 3",
        "Error: interrupt raised KeyboardInterrupt",
        "3",
    ]

    class Leaving(CalculatorEnv):
        tools = (leave, interrupt)

    env = Leaving(agentsgym.load_tokenizer(agentsgym.DEFAULT_TOKENIZER))
    agent = agentsgym.ScriptedAgent(
        ['<tool_call>\n{"name": "leave", "arguments": {"code": 1}}\n</tool_call>', "\\boxed{1}"]
    )
    episode = env.run_trial([{"a": 0, "b": 0, "c": 1}], agent).all_episodes[0]
    assert episode.ok and episode.messages[2]["content"] == "Error: leave raised SystemExit: 1"
    later = env.run_trial([{"a": 1, "b": 2, "c": 3}], calculator_solver())  # the loop lives
    assert later.episodes[0].ok


def test_a_huge_result_is_cut_and_says_so() -> None:
    def flood(n: int) -> str:
        """Return n characters.

        Args:
            n: how many
        """
        return "x" * n

    runner = ToolRunner(as_tools([flood]), max_result_chars=1000)
    small, huge = run(runner, _call("flood", n=1000), _call("flood", n=10_000_000))
    assert small == "x" * 1000
    assert huge.startswith("x" * 1000 + "\n[cut: the result was 10000000 characters long")
    assert len(huge) < 1200

    class Flooding(ToolEnv):
        tools = (flood,)

    env = Flooding(env_config={"max_tool_result_chars": 500})
    toolbox = env.episode_tools({})
    assert toolbox is not None and toolbox.runner.max_result_chars == 500
