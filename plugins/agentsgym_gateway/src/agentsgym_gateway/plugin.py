"""agentsgym-gateway's plugin: the example harness envs (imported when built)."""

from __future__ import annotations

from typing import Any

from agentsgym import hookimpl


@hookimpl
def register_envs(register: Any) -> None:
    register(
        "gateway/OpenAIToolLoop-v0",
        "agentsgym_gateway.examples:OpenAIToolLoopEnv",
        description="addition by a plain openai client tool loop, through the model gateway",
    )
    register(
        "gateway/AgentsSDK-v0",
        "agentsgym_gateway.examples:AgentsSDKEnv",
        description="addition by an OpenAI Agents SDK app with a function tool",
    )
    register(
        "gateway/PydanticAI-v0",
        "agentsgym_gateway.examples:PydanticAIEnv",
        description="addition by a pydantic-ai agent with a tool",
    )
