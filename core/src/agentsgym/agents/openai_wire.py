"""OpenAI's request and reply shapes, with vLLM's token-id fields, as agentsgym's types.

A chat reply without prompt ids is text only (what the model conditioned on is
unknown, so the runner retokenizes it); a completion reply's prompt is the episode's
exact ids when the server does not echo them. A reply's top-level ``policy_version``
(agentsgym's loopback model server sends it; a trainer's server can) becomes the
action's: the version of the weights that generated it. vLLM's token-in generate API
reports a version per token instead (``weight_versions`` spans): a reply that an
in-place weight update interrupted has tokens of two versions.
"""

from __future__ import annotations

import json
from typing import Any

from agentsgym.errors import AgentError
from agentsgym.types import AgentAction, Message, Messages

TOKEN_ID_FIELDS = ("logprobs", "return_token_ids")
"""vLLM's request fields for sampled ids, logprobs and prompt ids (vLLM >= 0.10.2)."""


def chat_prompt(messages: Messages, tools: Any) -> dict[str, Any]:
    """The ``/chat/completions`` fields of a conversation (and the episode's tools)."""
    prompt: dict[str, Any] = {"messages": [as_openai(m) for m in messages]}
    if tools:
        prompt["tools"] = list(tools)
    return prompt


def first_choice(body: Any, base_url: str) -> dict[str, Any]:
    """The reply's first choice; an AgentError for a reply without one."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise AgentError(f"the server at {base_url} returned no choices: {body!r:.200}")
    return choices[0]  # type: ignore[no-any-return]


def chat_action(body: dict[str, Any], choice: dict[str, Any]) -> AgentAction:
    """A chat reply as an action: sampled ids only when the server sent prompt ids."""
    message = choice.get("message") or {}
    text = message.get("content") or ""
    prompt_ids = body.get("prompt_token_ids")
    # Without prompt ids, sampled ids cannot follow the episode's prompt: retokenized.
    ids = choice.get("token_ids") if is_ids(prompt_ids) else None
    logprobs = None
    content = (choice.get("logprobs") or {}).get("content")
    if is_ids(ids) and isinstance(content, list) and len(content) == len(ids):
        logprobs = [float(item["logprob"]) for item in content]
    action = action_of(text, ids, logprobs, choice.get("finish_reason"), prompt_ids)
    action.tool_calls = message.get("tool_calls") or None  # parsed by the server
    action.policy_version = policy_version_of(body)
    return action


def completion_action(
    choice: dict[str, Any], prompt_token_ids: list[int], body: dict[str, Any] | None = None
) -> AgentAction:
    """A completion reply to the episode's ids as an action (``body``: the whole reply,
    for its ``policy_version``)."""
    ids = choice.get("token_ids")
    prompt_ids = choice.get("prompt_token_ids")
    logprobs = None
    token_logprobs = (choice.get("logprobs") or {}).get("token_logprobs")
    if is_ids(ids) and isinstance(token_logprobs, list) and len(token_logprobs) == len(ids):
        logprobs = [float(x) if x is not None else float("nan") for x in token_logprobs]
    if not is_ids(prompt_ids):
        prompt_ids = list(prompt_token_ids)
    action = action_of(
        choice.get("text") or "", ids, logprobs, choice.get("finish_reason"), prompt_ids
    )
    action.policy_version = policy_version_of(body)
    return action


def generate_action(
    choice: dict[str, Any], prompt_token_ids: list[int], body: dict[str, Any]
) -> AgentAction:
    """A reply of vLLM's token-in generate API (``/inference/v1/generate``, ``output_mode``
    text) as an action: its sampled ids, their logprobs and each token's weight version
    from the choice's ``weight_versions`` spans (the label of the weights the engine held
    when it sampled the token, set by ``/update_weight_version``)."""
    ids = choice.get("token_ids")
    content = (choice.get("logprobs") or {}).get("content")
    logprobs = None
    if is_ids(ids) and isinstance(content, list) and len(content) == len(ids):
        logprobs = [float(item["logprob"]) for item in content]
    action = action_of(
        choice.get("text") or "", ids, logprobs, choice.get("finish_reason"), prompt_token_ids
    )
    versions = span_versions(choice.get("weight_versions"), len(ids) if is_ids(ids) else 0)
    if versions is not None and action.token_ids is not None:
        action.policy_versions = versions
        action.policy_version = min(versions) if versions else policy_version_of(body)
    else:
        action.policy_version = policy_version_of(body)
    return action


def span_versions(spans: Any, count: int) -> list[int] | None:
    """One version per output token from vLLM's ``weight_versions`` spans (``[{"version",
    "start", "end"}]`` over output-token indexes); ``None`` unless the spans cover every
    token with an integer label (a server never given a version labels ``"default"``)."""
    if not isinstance(spans, list):
        return None
    versions: list[int | None] = [None] * count
    for span in spans:
        try:
            label, start, end = str(span["version"]), int(span["start"]), int(span["end"])
        except (KeyError, TypeError, ValueError):
            return None
        if not label.lstrip("-").isdigit() or not 0 <= start <= end <= count:
            return None
        versions[start:end] = [int(label)] * (end - start)
    if any(v is None for v in versions):
        return None
    return [int(v) for v in versions if v is not None]


def policy_version_of(body: Any) -> int | None:
    """The reply's ``policy_version`` (an integer), or ``None`` when it has none (the
    openai agent and the model gateway read a reply's version with it)."""
    version = body.get("policy_version") if isinstance(body, dict) else None
    return version if isinstance(version, int) and not isinstance(version, bool) else None


def action_of(
    text: str, ids: Any, logprobs: list[float] | None, finish: Any, prompt_ids: Any
) -> AgentAction:
    info: dict[str, Any] = {"finish_reason": str(finish) if finish else None}
    truncated = str(finish) == "length"
    if not is_ids(ids):
        return AgentAction(text=text, info=info, truncated=truncated)
    if logprobs is None:
        info["logprobs"] = "missing"
    prompt = list(prompt_ids) if is_ids(prompt_ids) else None
    return AgentAction(text, list(ids), logprobs, info, prompt, truncated)


def as_openai(message: Message) -> Message:
    """A message as OpenAI's API takes it: a tool call's arguments as a JSON string."""
    calls = message.get("tool_calls")
    if not calls:
        return message
    wire = [
        {**c, "function": {**c["function"], "arguments": _json_text(c["function"])}} for c in calls
    ]
    return Message(**{**message, "tool_calls": wire})  # type: ignore[typeddict-item]


def _json_text(function: dict[str, Any]) -> str:
    arguments = function.get("arguments", {})
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def parse_tool_arguments(messages: Messages) -> Messages:
    """The messages as vLLM hands them to the chat template: each tool call's
    ``arguments``, JSON text on OpenAI's wire, parsed into an object (templates write it
    with ``tojson``, so the rendering is what the model sampled, ``{"a": 1}``, never the
    escaped text ``"{\\"a\\": 1}"``); empty or missing arguments become ``{}``, as vLLM
    makes them. Text that is not JSON stays as it is (vLLM refuses the request); the
    messages given are not changed."""
    rendered: Messages = []
    for message in messages:
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if calls:
            parsed = [_parsed_call(call) for call in calls]
            message = Message(**{**message, "tool_calls": parsed})  # type: ignore[typeddict-item]
        rendered.append(message)
    return rendered


def _parsed_call(call: Any) -> Any:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        return call
    arguments = function.get("arguments")
    if isinstance(arguments, (dict, list)):
        return call
    if not arguments:
        parsed: Any = {}
    else:
        try:
            parsed = json.loads(arguments)
        except (TypeError, json.JSONDecodeError):
            return call
    return {**call, "function": {**function, "arguments": parsed}}


def is_ids(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(i, int) for i in value)
