"""OpenAI's wire as vLLM reads it: a tool call's JSON-text arguments are handed to the
chat template as an object (so it writes them as the model sampled them), and a reply's
weight version is read from its top-level ``policy_version``."""

from __future__ import annotations

import json
from typing import Any

import pytest

import agentsgym
from agentsgym.runtime import ChatTokenizer, parse_tool_arguments, policy_version_of


def _call(arguments: Any) -> dict[str, Any]:
    return {"id": "c1", "type": "function", "function": {"name": "add", "arguments": arguments}}


def _assistant(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": list(calls)}


def test_json_text_arguments_become_objects_and_nothing_else_changes() -> None:
    messages = [
        {"role": "user", "content": "add"},
        _assistant(_call('{"a": 1, "b": 2}'), _call(""), _call({"a": 3}), _call("not json")),
        {"role": "tool", "tool_call_id": "c1", "content": "3"},
    ]
    before = json.dumps(messages)
    rendered = parse_tool_arguments(messages)
    arguments = [c["function"]["arguments"] for c in rendered[1]["tool_calls"]]
    # JSON text parsed; empty becomes {} as vLLM makes it; an object and non-JSON stay
    assert arguments == [{"a": 1, "b": 2}, {}, {"a": 3}, "not json"]
    assert rendered[0] is messages[0] and rendered[2] is messages[2]
    assert json.dumps(messages) == before  # the caller's messages are not changed


def test_the_template_writes_a_parsed_call_as_the_model_sampled_it() -> None:
    chat = ChatTokenizer(agentsgym.load_tokenizer("agentsgym/tiny-chatml"))
    messages = [{"role": "user", "content": "add"}, _assistant(_call('{"a": 1}'))]
    as_text = chat.render(messages, add_generation_prompt=False)
    as_vllm = chat.render(parse_tool_arguments(messages), add_generation_prompt=False)
    assert '"arguments": "{\\"a\\": 1}"' in as_text  # the escaped string no model sampled
    assert '"arguments": {"a": 1}' in as_vllm


@pytest.mark.parametrize(
    ("body", "version"),
    [({"policy_version": 3}, 3), ({"policy_version": True}, None), ({}, None), ([], None)],
)
def test_a_replys_policy_version_is_an_integer_or_none(body: Any, version: int | None) -> None:
    assert policy_version_of(body) == version
