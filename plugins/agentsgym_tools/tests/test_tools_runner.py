"""The runner answers every call with a tool message: results, and every way a call can
go wrong (raises, overruns, bad arguments, unknown names, too many calls) as an error
the model can read. Calls of one reply run concurrently."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agentsgym_tools import ToolRunner, as_tools


def _call(tool_name: str, /, **arguments: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": tool_name, "arguments": arguments}}


def run(runner: ToolRunner, *calls: dict[str, Any]) -> list[str]:
    return [m["content"] for m in asyncio.run(runner.run(list(calls)))]


def test_results_errors_and_limits_are_tool_messages() -> None:
    def divide(a: int, b: int) -> float:
        """Divide.

        Args:
            a: numerator
            b: denominator
        """
        return a / b

    def table(n: int) -> dict[str, Any]:
        """A table.

        Args:
            n: size
        """
        return {"n": n, "name": "ü"}

    runner = ToolRunner(as_tools([divide, table]), max_calls=4)
    answers = run(
        runner,
        _call("divide", a=6, b=3),
        _call("table", n=2),
        _call("divide", a=1, b=0),
        _call("nope"),
        _call("table", m=1),
    )
    assert answers[0] == "2.0" and json.loads(answers[1]) == {"n": 2, "name": "ü"}
    assert answers[2] == "Error: divide raised ZeroDivisionError: division by zero"
    assert answers[3].startswith(
        "Error: there is no tool named 'nope'; the tools are: divide, table"
    )
    assert answers[4] == "Error: not run: at most 4 tool calls are answered per turn"
    assert run(runner, _call("table", m=1))[0].startswith("Error: bad arguments for table")
    bad = {"type": "function", "function": {"name": "table", "arguments": "{not json"}}
    assert run(runner, bad)[0].startswith("Error: the arguments of table must be a JSON object")


def test_calls_of_one_reply_run_concurrently_and_overruns_are_errors() -> None:
    both_started = asyncio.Event()
    started: list[str] = []

    async def wait_for_the_other(name: str) -> str:
        """Wait until both calls are running.

        Args:
            name: who
        """
        started.append(name)
        if len(started) == 2:
            both_started.set()
        await both_started.wait()  # run one after the other, this would wait forever
        return name

    async def hang() -> str:
        """Never return."""
        await asyncio.Event().wait()
        return "never"

    runner = ToolRunner(as_tools([wait_for_the_other, hang]), timeout_seconds=60)
    assert run(
        runner, _call("wait_for_the_other", name="a"), _call("wait_for_the_other", name="b")
    ) == ["a", "b"]
    quick = ToolRunner(as_tools([hang]), timeout_seconds=0.05)
    assert run(quick, _call("hang")) == ["Error: hang did not finish within 0.05 seconds"]
