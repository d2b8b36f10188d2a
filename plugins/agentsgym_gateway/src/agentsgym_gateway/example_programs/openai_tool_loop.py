"""A plain `openai` client tool loop: ask, run the tools the model calls, repeat.

Reads the task from stdin; prints the model's final answer. Nothing in it knows
about agentsgym: OPENAI_BASE_URL and OPENAI_API_KEY point it at its model.
"""

import json
import os
import sys

from openai import OpenAI

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
]
MAX_TURNS = 4


def add(a: int, b: int) -> int:
    return a + b


def main() -> None:
    client = OpenAI()
    model = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
    messages = [
        {"role": "system", "content": "Use the add tool for arithmetic, then answer."},
        {"role": "user", "content": sys.stdin.read()},
    ]
    for _ in range(MAX_TURNS):
        reply = client.chat.completions.create(model=model, messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        if not message.tool_calls:
            print(message.content)
            return
        calls = [call.model_dump() for call in message.tool_calls]
        messages.append(
            {"role": "assistant", "content": message.content or "", "tool_calls": calls}
        )
        for call in message.tool_calls:
            result = add(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": str(result)})
    print(message.content or "")


if __name__ == "__main__":
    main()
