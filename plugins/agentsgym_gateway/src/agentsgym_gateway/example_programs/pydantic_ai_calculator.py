"""A pydantic-ai agent with one tool, over OpenAI's Chat Completions.

Reads the task from stdin; prints the agent's final output. Nothing in it knows about
agentsgym: OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL point it at its model.
"""

import os
import sys

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

model = OpenAIChatModel(
    os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
    provider=OpenAIProvider(
        base_url=os.environ.get("OPENAI_BASE_URL"), api_key=os.environ.get("OPENAI_API_KEY")
    ),
)
agent = Agent(model, system_prompt="Use the add tool for arithmetic, then answer.")


@agent.tool_plain
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if __name__ == "__main__":
    print(agent.run_sync(sys.stdin.read()).output)
