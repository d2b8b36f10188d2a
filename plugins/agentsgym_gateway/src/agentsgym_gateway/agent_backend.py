"""An in-process agent as the gateway's backend (a local model: ``--agent transformers``).

A chat call is rendered with the env's chat template as vLLM renders it (the request's
messages, each tool call's JSON-text arguments parsed into an object,
:func:`agentsgym.runtime.parse_tool_arguments`; with its tools) into the exact prompt
ids, and the agent is called with them (a token-in agent such as agentsgym-trl's
transformers agent is conditioned on those very ids, so a call that rewrote its history
is answered on the rewritten history). The answer is a chat completion, as vLLM writes
one with ``return_token_ids``: prompt ids, sampled ids and logprobs, and the agent's
``policy_version`` (the weights that answered). The agent's own sampling settings
apply; the request's are not read. The agent gets the episode's
:class:`~agentsgym.EpisodeContext` with each call (task, rollout and episode index, the
per-rollout seed; ``step``: the calls answered before; ``tools``: the call's). Text
completions, and several choices per call (``n`` above 1), need a server backend (HTTP
400 says so). A streaming request gets the complete answer as events.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agentsgym import EpisodeContext, call_agent
from agentsgym.runtime import parse_tool_arguments
from agentsgym_gateway.backend import BackendAnswer
from agentsgym_gateway.jsonio import dumps, loads
from agentsgym_gateway.wire import requested_choices

AGENT_CALL_THREADS = 256
"""Threads that wait on the agent at once: enough for every program of a large run to
have its call in the agent's queue (a local model batches what is waiting)."""
AGENT_MODEL = "agentsgym-policy"
"""The model name an agent backend serves (any name a program asks for is answered)."""


def _answer(status: int, body: Any) -> BackendAnswer:
    return BackendAnswer(status, dumps(body), "application/json")


class AgentBackend:
    """Answers chat completions with ``agent``, rendering prompts with ``chat``."""

    def __init__(self, agent: Any, chat: Any, env_id: str = "harness") -> None:
        self.agent = agent
        self.chat = chat
        self.env_id = env_id
        self.base_url = "agent://" + type(agent).__name__
        self._threads = ThreadPoolExecutor(AGENT_CALL_THREADS, "agentsgym-gateway-agent")

    async def get(self, path: str) -> BackendAnswer:
        model = {"id": AGENT_MODEL, "object": "model", "created": 0, "owned_by": "agentsgym"}
        return _answer(200, {"object": "list", "data": [model]})

    async def post(
        self, path: str, body: bytes, context: EpisodeContext | None = None
    ) -> BackendAnswer:
        """Answer a call; ``context``: the episode of the program that made it (the engine's,
        through the gateway session), handed to the agent with the call's tools."""
        if path != "/chat/completions":
            message = "an agent backend answers chat completions only; use a model server"
            return _answer(400, {"error": {"message": message, "type": "invalid_request_error"}})
        request = loads(body)
        if requested_choices(request) > 1:
            message = (
                "an agent backend samples one choice per call: ask for n=1 and make one call "
                "per sample, or put a model server (vLLM) behind the gateway"
            )
            return _answer(400, {"error": {"message": message, "type": "invalid_request_error"}})
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._threads, self._chat, request, context)

    def _chat(self, request: dict[str, Any], context: EpisodeContext | None) -> BackendAnswer:
        messages = request.get("messages") or []
        tools = request.get("tools") or []
        rendering = self.chat.with_tools(tools) if tools else self.chat
        # as vLLM renders it: a tool call's arguments written as the model sampled them
        prompt_ids = rendering.encode_prompt(parse_tool_arguments(messages))
        if context is None:  # a gateway used on its own, outside an env's episodes
            context = EpisodeContext("gateway", self.env_id, 0, 0, 0, 0)
        context = dataclasses.replace(context, tools=tuple(tools))
        action, _ = call_agent(self.agent, messages, None, prompt_ids, context=context)
        ids = action.token_ids
        if ids is None:  # a text-only agent: recorded as retokenized
            ids_fields: dict[str, Any] = {}
        else:
            ids_fields = {"token_ids": list(ids)}
        logprobs = None
        if action.logprobs is not None and request.get("logprobs"):
            logprobs = {
                "content": [
                    {"token": "", "logprob": float(v), "bytes": [], "top_logprobs": []}
                    for v in action.logprobs
                ]
            }
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": action.text},
            "logprobs": logprobs,
            "finish_reason": "length" if action.truncated else "stop",
            **ids_fields,
        }
        response: dict[str, Any] = {
            "id": f"chatcmpl-{secrets.token_hex(12)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model") or AGENT_MODEL,
            "choices": [choice],
            "usage": {
                "prompt_tokens": len(prompt_ids),
                "completion_tokens": len(ids or []),
                "total_tokens": len(prompt_ids) + len(ids or []),
            },
        }
        if ids is not None:
            response["prompt_token_ids"] = list(action.prompt_token_ids or prompt_ids)
        if action.policy_version is not None:  # as agentsgym's loopback server sends it
            response["policy_version"] = action.policy_version
        return _answer(200, response)

    async def aclose(self) -> None:
        """Stop the waiting threads; the agent belongs to the run and stays open."""
        self._threads.shutdown(wait=False, cancel_futures=True)
