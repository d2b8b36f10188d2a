"""check_env's check of an env's tools: the schemas it declares per task, and that a
call to an unknown tool or with unreadable arguments is answered, not fatal."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agentsgym.agents import FunctionAgent
from agentsgym.engine import toolbox_now
from agentsgym.testing.check_report import require
from agentsgym.types import AgentAction

__all__ = ["check_tools"]

UNKNOWN_TOOL = "agentsgym_check_no_such_tool"


def check_tools(make_env: Callable[..., Any], tasks: list[dict[str, Any]]) -> str:
    """Check the tools of ``tasks`` on envs from ``make_env(**env_config)``."""
    env = make_env()
    declared = []
    for task in tasks:
        schemas = getattr(toolbox_now(env, task), "schemas", None)
        if schemas:
            declared.append((task, list(schemas)))
    for task, schemas in declared:
        _check_schemas(task, schemas)
    if not declared:
        return "the env declares no tools"
    task, schemas = declared[0]
    episode = make_env(max_steps_per_episode=2).run_trial([task], _bad_caller(schemas))
    played = episode.all_episodes[0]
    require(played.error is None, f"a call to an unknown tool failed the episode: {played.error}")
    answers = [m for m in played.messages if m["role"] == "tool"]
    require(
        len(answers) == 2 and all(isinstance(m.get("content"), str) for m in answers),
        f"an unknown tool and bad arguments must each get a tool message, got {answers}",
    )
    return f"{len(declared)} of {len(tasks)} tasks declare tools"


def _check_schemas(task: dict[str, Any], schemas: list[Any]) -> None:
    names = [str((s.get("function") or {}).get("name") or "") for s in schemas]
    require(
        all(s.get("type") == "function" for s in schemas) and all(names),
        f"tools of task {task} are not OpenAI function schemas with names: {schemas!r:.300}",
    )
    require(len(set(names)) == len(names), f"task {task} declares a tool twice: {names}")
    json.dumps(schemas)


def _bad_caller(schemas: list[Any]) -> FunctionAgent:
    """An agent that first calls an unknown tool and a known one with unreadable
    arguments, then replies plainly."""
    known = schemas[0]["function"]["name"]
    calls = [
        _call(0, UNKNOWN_TOOL, "{}"),
        _call(1, known, "{not json"),
    ]

    def reply(messages: list[dict[str, Any]], state: Any) -> tuple[Any, Any]:
        if any(m["role"] == "assistant" for m in messages):
            return "I am not sure.", state
        return AgentAction("", tool_calls=calls), state

    return FunctionAgent(reply)


def _call(index: int, name: str, arguments: str) -> dict[str, Any]:
    return {
        "id": f"call_{index}",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }
