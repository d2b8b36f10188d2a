"""An OpenAI Agents SDK app with one function tool (the SDK's default Responses API).

Reads the task from stdin; prints the agent's final output. Nothing in it knows about
agentsgym: OPENAI_BASE_URL and OPENAI_API_KEY point the SDK at its model.
"""

import os
import sys

from agents import Agent, Runner, function_tool


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def main() -> None:
    agent = Agent(
        name="calculator",
        instructions="Use the add tool for arithmetic, then answer with the number.",
        tools=[add],
        model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
    )
    result = Runner.run_sync(agent, sys.stdin.read(), max_turns=4)
    print(result.final_output)


if __name__ == "__main__":
    main()
